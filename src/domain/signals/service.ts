import type { EventBus } from '../core/bus.ts';
import type { SessionEventPayload } from '../core/events.ts';
import { within } from '../core/within.ts';
import type { SignalStore } from './store.ts';

/** What must reach every instance even when the bus is out of reach at the moment of the change. */
export type Signal = { kind: 'event'; sessionId: string; event: SessionEventPayload } | { kind: 'revoke_key'; keyId: string };

/** How long a change's request waits for the bus to take its signal. */
const DELIVER_WAIT_MS = 1_000;
/** Pending signals read at a time by `flush`. */
const FLUSH_BATCH = 100;

/**
 * An outbox for signals that take access away (a user removed, a session deleted, a key
 * revoked): each is written by its change's store in the change's transaction, handed to the
 * bus after the commit, and deleted once the bus has it. One the bus could not take stays, and `flush` (every
 * instance runs it on a timer) delivers it when the bus is back, oldest first. Delivery is at
 * least once; each of these signals means the same the second time.
 */
export function signalOutbox(store: SignalStore, bus: EventBus, log: { warn(obj: unknown, msg?: string): void }) {
  const send = (signal: Signal) =>
    signal.kind === 'event' ? bus.publish(signal.sessionId, signal.event).then(() => undefined) : bus.revokeKey(signal.keyId);

  let flushing: Promise<void> | null = null;
  /** Whether a signal of this process is known to wait: it then tries every tick, not only now and then. */
  let waiting = false;

  return {
    /**
     * Hands a recorded signal to the bus now. It never throws: the change it announces is
     * committed, so the caller's request succeeded; a signal the bus refused is left for `flush`.
     */
    async deliver(id: bigint, signal: Signal): Promise<void> {
      try {
        // The request waits for this: a bus out of reach has a second, then `flush` takes over
        // (a late delivery of this very call is harmless, signals mean the same twice).
        const taken = send(signal).then(() => true);
        if (!(await within(taken, DELIVER_WAIT_MS, false))) {
          throw new Error('the event bus did not take the signal within a second');
        }
        await store.remove(id);
      } catch (err) {
        waiting = true;
        log.warn({ err, signal: signal.kind }, 'a signal could not be handed to the event bus now; it is delivered when the bus is back');
      }
    },

    /** Delivers whatever is pending, oldest first; stops at the first the bus refuses. */
    flush(): Promise<void> {
      flushing ??= (async () => {
        try {
          for (;;) {
            const pending = await store.pending(FLUSH_BATCH);
            for (const { id, signal } of pending) {
              await send(signal);
              await store.remove(id);
            }
            if (pending.length < FLUSH_BATCH) {
              waiting = false;
              return;
            }
          }
        } catch {
          // The bus or the database is out of reach: the rows wait for the next flush.
        } finally {
          flushing = null;
        }
      })();
      return flushing;
    },

    /**
     * Flushes every `everyMs` while a signal of this process waits, and every
     * `sweepMs` in any case (for one left by an instance that died before it could deliver it),
     * until the returned function is called.
     */
    start(everyMs: number, sweepMs: number): () => void {
      let last = Date.now();
      const timer = setInterval(() => {
        if (!waiting && Date.now() - last < sweepMs) return;
        last = Date.now();
        void this.flush();
      }, everyMs);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}

export type SignalOutbox = ReturnType<typeof signalOutbox>;
