import type { SessionEvent } from './events.ts';
import { type BusItem, type BusSubscription, type Numbered, type StreamEnd, streamEndCodes } from './bus.ts';
import type { Viewer } from './viewer.ts';

/** Why a watch ends early: the bus's reasons, or a change in the session or the caller's access. */
export const watchEndCodes = [...streamEndCodes, 'SESSION_DELETED', 'ACCESS_REVOKED'] as const;

export interface WatchEnd extends Omit<StreamEnd, 'code'> {
  code: (typeof watchEndCodes)[number];
}
export type WatchItem<E extends Numbered = SessionEvent> = E | WatchEnd;
export const isWatchEnd = <E extends Numbered>(item: WatchItem<E>): item is WatchEnd => 'end' in item;

/** How a watch ends once the API key it was opened with is gone. */
export const KEY_DELETED_END: WatchEnd = {
  end: true,
  code: 'ACCESS_REVOKED',
  reason: 'The API key of this stream was deleted',
  lastSeq: null,
};

export type WatchStep<E extends Numbered = SessionEvent> = { emit?: WatchItem<E>; stop?: boolean };

export interface WatchStream<E extends Numbered = SessionEvent> extends AsyncIterableIterator<WatchItem<E>> {
  /**
   * The next item if it can be had now, with no turn of the event loop (a live stream's next
   * token, once its access is current); null when nothing has come yet (then `woken`);
   * undefined when only `next()` can tell (an end, a wait for access, a read from the log).
   * Reading by `poll`, `woken` and `next` yields the same items as iterating.
   */
  poll(): WatchItem<E> | null | undefined;
  /** Settles when `poll` may have something new. */
  woken(): Promise<void>;
  close(): void;
  /** Ends the watch from outside (a deleted key, say): `end` is the last item it yields. */
  interrupt(end: WatchEnd): void;
}

/** A watch's pass to deliver, kept current by the access gate (`access/gate.ts`). */
export interface AccessTicket {
  /** Null when the watch may deliver now; else a promise that settles once its access was checked again. */
  admit(): Promise<void> | null;
  /** Holds delivery until the watcher's API key is seen to exist, or ends the watch if it is gone. */
  confirmKey(): void;
  close(): void;
}

/**
 * Keeps open watches honest about access whatever happened to the signals that announce its loss
 * (a revocation Redis never carried). A watch of a session needs its viewer's membership and key;
 * one of the viewer's own feed (`sessionId` null) needs only the key. `lost` ends the watch.
 */
export interface WatchGate {
  open(viewer: Viewer, sessionId: string | null, lost: (end: WatchEnd) => void): AccessTicket;
}

/**
 * A filtered view of a bus subscription (of `In` events, showing the `Out` ones `step` emits).
 * Written as an iterator rather than an async generator so that `return()` (a client
 * unsubscribing) frees the subscription at once, even while it waits for the next event; a
 * generator would only notice at its next event. `admit`, when given, holds each event until
 * the watcher's access is known to be current (`WatchGate`).
 */
export function watchStream<In extends Numbered, Out extends Numbered = In>(
  source: BusSubscription<In>,
  step: (item: BusItem<In>) => WatchStep<Out>,
  onFinish: () => void = () => {},
  admit: () => Promise<void> | null = () => null,
): WatchStream<Out> {
  let finished = false;
  let interrupted: WatchEnd | null = null;
  /** An event `poll` took that must wait for access: `next()` delivers it once admitted. */
  let parked: { emit: WatchItem<Out>; stop: boolean; held: Promise<void> } | null = null;
  const finish = () => {
    if (finished) return;
    finished = true;
    source.close();
    onFinish();
  };
  return {
    async next() {
      if (parked && !finished) {
        const { emit, stop, held } = parked;
        parked = null;
        await held;
        if (!interrupted) {
          if (stop) finish();
          return { value: emit, done: false };
        }
      }
      parked = null;
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
    poll() {
      while (!finished && !interrupted && !parked) {
        const event = source.poll?.();
        if (!event) return event;
        const { emit, stop } = step(event);
        const held = emit && !isWatchEnd(emit) ? admit() : null;
        if (held) {
          parked = { emit: emit!, stop: stop ?? false, held };
          return undefined;
        }
        if (stop) finish();
        if (emit) return emit;
      }
      return undefined;
    },
    woken: () => source.woken!(),
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
