import { type BusItem, type BusSubscription, isStreamEnd, type StreamEnd, streamEndCodes } from '../core/bus.ts';
import type { SessionEvent } from '../core/events.ts';

/** Why a watch ends early: the bus's reasons, or a change in the session or the caller's access. */
export const watchEndCodes = [...streamEndCodes, 'SESSION_DELETED', 'ACCESS_REVOKED'] as const;

export interface WatchEnd extends Omit<StreamEnd, 'code'> {
  code: (typeof watchEndCodes)[number];
}
export type WatchItem = SessionEvent | WatchEnd;
export const isWatchEnd = (item: WatchItem): item is WatchEnd => 'end' in item;

type Step = { emit?: WatchItem; stop?: boolean };

export interface WatchStream extends AsyncIterableIterator<WatchItem> {
  close(): void;
  /** Ends the watch from outside (a deleted key, say): `end` is the last item it yields. */
  interrupt(end: WatchEnd): void;
}

/**
 * A filtered view of a bus subscription. Written as an iterator rather than an async generator
 * so that `return()` (a client unsubscribing) frees the subscription at once, even while it
 * waits for the next event; a generator would only notice at its next event. `admit`, when
 * given, holds each event until the watcher's access is known to be current (`access-gate.ts`).
 */
export function watchStream(
  source: BusSubscription,
  step: (item: BusItem) => Step,
  onFinish: () => void = () => {},
  admit: () => Promise<void> | null = () => null,
): WatchStream {
  let finished = false;
  let interrupted: WatchEnd | null = null;
  const finish = () => {
    if (finished) return;
    finished = true;
    source.close();
    onFinish();
  };
  return {
    async next() {
      while (!finished) {
        if (interrupted) break;
        const r = await source.next();
        if (interrupted || r.done) break;
        const { emit, stop } = step(r.value);
        const held = emit && !isWatchEnd(emit) ? admit() : null;
        if (held) await held;
        if (interrupted) break;
        if (stop) finish();
        if (emit) return { value: emit, done: false };
      }
      const last = interrupted;
      interrupted = null;
      finish();
      return last ? { value: last, done: false } : { value: undefined, done: true };
    },
    async return() {
      finish();
      return { value: undefined, done: true };
    },
    close: finish,
    interrupt(end) {
      if (finished || interrupted) return;
      interrupted = end;
      source.close();
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/** Ends a watch when the session goes away or the watcher is removed from it. */
export function sessionWatchStep(viewerId: string, promptId: string | null) {
  let lastSeq: number | null = null;
  return (item: BusItem): Step => {
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
