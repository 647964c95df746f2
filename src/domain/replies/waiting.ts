import type { EventBus } from '../core/bus.ts';
import { isStreamEnd } from '../core/bus.ts';
import type { SessionEvent } from '../core/events.ts';
import type { ReplyStore } from './ports.ts';

/**
 * How often a reply waiting for others looks at their rows even when it heard nothing: an
 * event can be missed (a bus that lost a message), and a reply of an instance that died ends by
 * recovery, which may tell nobody this instance is listening to.
 */
const RECHECK_MS = 5_000;

/** Events after which a reply being waited for may have ended. */
const mayEnd = (e: SessionEvent) =>
  e.type === 'error' ||
  e.type === 'reply_removed' ||
  e.type === 'end_prompt' ||
  (e.type === 'assistant_message' && e.message.status !== 'streaming');

/**
 * Waits until none of `messageIds` is being written (a prompt answered after the replies under
 * way when it was saved: `enqueue`, and `interrupt` and `rollback` once those have stopped). The
 * replies may be written by any instance: their rows are the truth, read again when the
 * session's events say one may have ended, and every RECHECK_MS. Rejects with the signal's
 * reason when it aborts (the waiting reply was itself stopped).
 */
export function repliesEnded(bus: EventBus, store: Pick<ReplyStore, 'stillWriting'>) {
  return async function ended(sessionId: string, messageIds: string[], signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    // From this point on nothing published is missed, so rows read next are never older than the events.
    const watch = bus.subscribe(sessionId, { after: await bus.position(sessionId) });
    let abandon = () => {};
    const stopped = new Promise<never>((_, reject) => {
      abandon = () => reject(signal.reason);
      signal.addEventListener('abort', abandon, { once: true });
    });
    stopped.catch(() => {});
    let timer: NodeJS.Timeout | undefined;
    try {
      let left = await store.stillWriting(messageIds);
      let next: Promise<unknown> | null = watch.next();
      while (left.length) {
        signal.throwIfAborted();
        const tick = new Promise<'tick'>((resolve) => {
          timer = setTimeout(() => resolve('tick'), RECHECK_MS);
        });
        const woke = await Promise.race([next ?? tick, tick, stopped]);
        clearTimeout(timer);
        if (woke === 'tick') {
          left = await store.stillWriting(left);
          continue;
        }
        const item = woke as IteratorResult<SessionEvent | { end: true }>;
        // A watch that ended (the bus is closing, or its log moved on) leaves the timer to look.
        if (item.done || isStreamEnd(item.value as never)) next = null;
        else {
          next = watch.next();
          if (mayEnd(item.value as SessionEvent)) left = await store.stillWriting(left);
        }
      }
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', abandon);
      watch.close();
    }
  };
}
