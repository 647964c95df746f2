import type { BusItem, BusSubscription, Numbered, StreamEnd } from '../domain/core/bus.ts';
import type { Ends } from './channel-kind.ts';

/**
 * The newest events of a channel held in this process: consecutive seqs, at most about
 * `retain` of them. `last` is the highest seq taken in (null while unknown).
 */
export class ReplayWindow<E extends Numbered> {
  private log: E[] = [];
  /** The size of each event in `log` (its JSON), and their sum. */
  private sizes: number[] = [];
  private bytes = 0;

  constructor(
    private readonly retain: number,
    public last: number | null,
    /** Events are also dropped, oldest first, to keep about this many bytes at most. */
    private readonly retainBytes: number,
    /** About the bytes an event holds (its kind's `sizeOf`). */
    private readonly sizeOf: (event: E) => number,
  ) {}

  /**
   * Takes an event in; one already seen is ignored, and one after a hole starts the window again
   * (`after` still finds it when the event names the seq it follows, `prev`).
   */
  push(event: E): boolean {
    if (this.last !== null && event.seq <= this.last) return false;
    if (this.last !== null && event.seq !== this.last + 1) this.drop(this.log.length);
    const size = this.sizeOf(event);
    this.log.push(event);
    this.sizes.push(size);
    this.bytes += size;
    // Trimmed in steps (to the count, or to three quarters of the bytes), so taking events in stays O(1) on average.
    if (this.log.length > this.retain + (this.retain >> 2)) this.drop(this.log.length - this.retain);
    if (this.bytes > this.retainBytes) {
      let n = 0;
      for (let left = this.bytes; n < this.log.length - 1 && left > (this.retainBytes * 3) / 4; n++) left -= this.sizes[n]!;
      this.drop(n);
    }
    this.last = event.seq;
    return true;
  }

  /**
   * The channel is known to have reached `seq`: a window behind it is dropped (its reader fetches
   * what lies between from the log), one at or past it is kept.
   */
  advance(seq: number) {
    if (this.last !== null && seq <= this.last) return;
    this.drop(this.log.length);
    this.last = seq;
  }

  /** Forgets every event held, and where it was: the next one taken in starts the window. */
  clear() {
    this.drop(this.log.length);
    this.last = null;
  }

  private drop(n: number) {
    for (const size of this.sizes.splice(0, n)) this.bytes -= size;
    this.log.splice(0, n);
  }

  /** The event after `seq`: null if there is none yet, undefined if it is not held here. */
  after(seq: number): E | null | undefined {
    if (this.last !== null && seq >= this.last) return null;
    const first = this.log[0]?.seq;
    if (first === undefined || seq + 1 < first) return this.log[0]?.prev === seq ? this.log[0] : undefined;
    return this.log[seq + 1 - first];
  }
}

/** Where a subscription reads: the window in memory, and behind it whatever log the bus keeps. */
export interface EventSource<E extends Numbered> {
  readonly window: ReplayWindow<E>;
  /** Settles when the window's `last` is known (a shared bus asks its server first). */
  readonly ready: Promise<void>;
  /** How its subscriptions end early, in its kind's words. */
  readonly ends: Ends;
  /** The channel's current seq, as the log that holds every event knows it. */
  current(): number | Promise<number>;
  /** Up to `count` events from `fromSeq` on, from the log behind the window (none where there is no such log). */
  range(fromSeq: number, count: number): Promise<E[]>;
}

const DONE: IteratorResult<never> = { value: undefined, done: true };

/** How long a resume from a seq beyond the channel's waits for it to be stored, in steps. */
const STORE_WAITS_MS = [20, 200];

/** Whether `event` is the one after `seq`: the next number, or the first after numbers skipped there. */
const follows = (event: Numbered, seq: number) => event.seq === seq + 1 || event.prev === seq;

/**
 * One subscription, the same on every bus and every kind of channel: a position (the last seq
 * handed out) in its channel's events, read from the window in memory or, when it is behind
 * that (a resume, a slow reader), from the source's log. It holds no events of its own beyond one batch read from the log, so a
 * consumer that stops reading costs next to nothing; one so far behind that its next event is
 * gone everywhere is ended with SLOW_CONSUMER. An end (shutdown, say) is delivered before any
 * event still waiting.
 */
export class Subscriber<E extends Numbered> implements BusSubscription<E> {
  private waiting: (() => void) | null = null;
  private pending: E[] = [];
  private final: StreamEnd | null = null;
  private done = false;
  private position: number | null;
  private started = false;

  constructor(
    private readonly source: EventSource<E>,
    /** Resume after this seq (checked at the first read), or from `start`. */
    private readonly after: number | undefined,
    /** Without `after`: the channel's seq when the subscription was asked for. */
    private readonly start: number | Promise<number> | undefined,
    private readonly onClose: (s: Subscriber<E>) => void,
  ) {
    this.position = after ?? null;
    if (start instanceof Promise) start.catch(() => {});
  }

  /** Ends the stream with a reason, delivered at the consumer's next read. */
  end(final: StreamEnd) {
    if (this.final || this.done) return;
    this.final = { ...final, lastSeq: final.lastSeq ?? this.position };
    this.wake();
  }

  wake() {
    const w = this.waiting;
    this.waiting = null;
    w?.();
  }

  private finish() {
    if (this.done) return;
    this.done = true;
    this.onClose(this);
  }

  /** A resume point must be a seq this channel issued whose successors are all still held. */
  private async resumable(after: number) {
    let current = await this.source.current();
    // A seq the instance writing the reply showed a moment ago may not be stored yet (a client
    // that moved to another instance at once): asked again before it counts as never issued.
    for (const wait of STORE_WAITS_MS) {
      if (after <= current) break;
      await new Promise((resolve) => setTimeout(resolve, wait));
      current = await this.source.current();
    }
    if (after > current) return false;
    if (after === current || this.source.window.after(after)) return true;
    const [next] = await this.source.range(after + 1, 1);
    return next !== undefined && follows(next, after);
  }

  private async begin() {
    this.started = true;
    try {
      await this.source.ready;
      this.position ??= await this.start!;
      if (this.after !== undefined && !(await this.resumable(this.after))) this.end(this.source.ends.expired(this.after));
    } catch {
      this.end(this.source.ends.unreadable(this.position));
    }
  }

  /** Reads on from the log what the window no longer holds; nothing there means the events are gone. */
  private async fill(position: number) {
    try {
      const events = await this.source.range(position + 1, 256);
      if (events[0] && follows(events[0], position)) this.pending = events;
      else if (this.source.window.last !== null && position < this.source.window.last) this.end(this.source.ends.slowConsumer(position));
    } catch {
      this.end(this.source.ends.unreadable(position));
    }
  }

  async next(): Promise<IteratorResult<BusItem<E>>> {
    if (!this.started) await this.begin();
    for (;;) {
      if (this.done) return DONE;
      if (this.final) {
        const final = this.final;
        this.finish();
        return { value: final, done: false };
      }
      const event = this.pending.shift() ?? this.source.window.after(this.position!);
      if (event) {
        this.position = event.seq;
        return { value: event, done: false };
      }
      if (event === undefined) await this.fill(this.position!);
      else await new Promise<void>((resolve) => (this.waiting = resolve));
    }
  }

  /**
   * The next event when it is here already, without a turn of the event loop: a live stream's
   * usual case, once a token. Null when there is none yet (`woken` says when to look again);
   * undefined when only `next()` can say (the first read, an end, a read from the log).
   */
  poll(): E | null | undefined {
    if (!this.started || this.done || this.final || this.pending.length > 0) return undefined;
    const event = this.source.window.after(this.position!);
    if (event) this.position = event.seq;
    return event;
  }

  /** Settles at the next event, end or close (after `poll` answered null). */
  woken(): Promise<void> {
    return new Promise<void>((resolve) => (this.waiting = resolve));
  }

  close() {
    this.finish();
    this.wake();
  }

  return(): Promise<IteratorResult<BusItem<E>>> {
    this.close();
    return Promise.resolve(DONE);
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

/** Listeners of one kind of signal (a revoked key, a cancel), told in the order they were added. */
export class Listeners<T> {
  private readonly set = new Set<(value: T) => void>();

  add(listener: (value: T) => void): () => void {
    this.set.add(listener);
    return () => this.set.delete(listener);
  }

  emit(value: T) {
    for (const listener of this.set) listener(value);
  }
}
