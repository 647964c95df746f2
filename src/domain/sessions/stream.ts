import { type BusItem, isStreamEnd } from '../core/bus.ts';
import type { WatchStep } from '../core/watch.ts';

/** Ends a watch when the session goes away or the watcher is removed from it. */
export function sessionWatchStep(viewerId: string, promptId: string | null) {
  let lastSeq: number | null = null;
  return (item: BusItem): WatchStep => {
    if (isStreamEnd(item)) return { emit: { ...item, lastSeq: item.lastSeq ?? lastSeq }, stop: true };
    if (item.type === 'session_deleted')
      return { emit: { end: true, code: 'SESSION_DELETED', reason: 'This session was deleted', lastSeq: item.seq }, stop: true };
    if (item.type === 'user_removed' && item.userId === viewerId) {
      return { emit: { end: true, code: 'ACCESS_REVOKED', reason: 'You were removed from this session', lastSeq: item.seq }, stop: true };
    }
    lastSeq = item.seq;
    if (promptId === null) return { emit: item };
    if (!('promptId' in item) || item.promptId !== promptId) return {};
    return { emit: item, stop: item.type === 'end_prompt' };
  };
}
