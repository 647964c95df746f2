import type { Redis } from 'ioredis';
import type { EventsConfig } from '../config.ts';
import type { Numbered } from '../domain/core/bus.ts';
import type { ChannelKind } from './channel-kind.ts';
import { eventTime } from './event-time.ts';
import { MAX_AHEAD, ownerKey, publishArgs, type Scripts, WriteMode } from './redis-scripts.ts';

/** Events published together for one channel, and the callers waiting for them to be stored. */
class Batch<E extends Numbered> {
  readonly events: E[] = [];
  readonly json: string[] = [];
  readonly settle: { resolve(event: E): void; reject(e: unknown): void }[] = [];
  /** Whether any of them is of a kind published many a second (a reply's tokens): those ask for the lease. */
  streamed = false;
  private finish!: () => void;
  /** Settles once Redis has answered for the batch (stored or refused). */
  readonly answered = new Promise<void>((resolve) => (this.finish = resolve));

  /** `numbered`: numbered here under the lease, shown to watchers here already; Redis only stores them. */
  constructor(public numbered: boolean) {}

  take(other: Batch<E>) {
    this.streamed ||= other.streamed;
    this.events.push(...other.events);
    this.json.push(...other.json);
    this.settle.push(...other.settle);
  }

  resolve() {
    this.events.forEach((e, i) => this.settle[i]!.resolve(e));
    this.finish();
  }

  reject(error: unknown) {
    for (const s of this.settle) s.reject(error);
    this.finish();
  }
}

/** How this instance is publishing to one channel (a session, a user's feed). */
class ChannelWrites<E extends Numbered> {
  /** Events published and not yet sent, in order. */
  due: Batch<E> | null = null;
  /** The call for this channel on its way: the next waits for its answer, so order holds. */
  sending: Batch<E> | null = null;
  /** While held, the next seq this instance gives and the last one Redis confirmed. */
  lease: { next: number; confirmed: number } | null = null;
  /** The lease goes back once what was numbered under it is confirmed; events meanwhile wait here. */
  yielding = false;
  later: Batch<E> | null = null;
  /** Refused while another instance holds the lease: tried again after `backoff` ms. */
  waiting = false;
  backoff = 0;
  /** A lease here ended with events shown and not stored: the next events skip past those numbers. */
  skipSince: number | null = null;
  lastPublishAt = 0;

  /**
   * How `batch` is written: confirmed under the lease, numbered past a lease lost, or numbered by
   * Redis (asking for the lease while a reply streams, unless this instance is shutting down).
   */
  modeFor(batch: Batch<E>, closing: boolean): WriteMode {
    if (batch.numbered) return WriteMode.confirm;
    if (this.skipSince !== null) return WriteMode.skip;
    return !closing && batch.streamed ? WriteMode.lease : WriteMode.redis;
  }
}

/** A batch on its way to Redis, and how it was written. */
interface Sent<E extends Numbered> {
  id: string;
  w: ChannelWrites<E>;
  batch: Batch<E>;
  mode: WriteMode;
}

export interface PublisherOptions {
  /** A lease not confirmed for this long may be taken over (its holder is taken for gone). */
  leaseMs?: number;
  /** A lease nothing was published under for this long is handed back. */
  leaseIdleMs?: number;
}

/**
 * Events this instance numbered, for its own watchers; `lost` when Redis refused what they were
 * shown; `released` once the channel's lease is no longer held here.
 */
export interface Here<E extends Numbered> {
  show(event: E): void;
  lost(id: string): void;
  released(id: string): void;
}

/** How long events numbered here may wait to be sent to Redis (see `schedule`). */
const CONFIRM_EVERY_MS = 5;

/** How long shutdown waits for what was published to be stored. */
const CLOSE_WAIT_MS = 5_000;

/**
 * Publishes one kind's events (sessions', users' feeds') through Redis. What one instance
 * publishes for a channel in a tick goes in one script call, every channel's in one pipeline; a
 * channel has one call on its way at a time, so its events keep the order they were published in.
 *
 * A reply streaming tokens would otherwise wait a round trip to Redis (and for Redis to get a
 * core) before its own watchers see each token. So the instance writing a reply takes the
 * session's lease: it numbers the session's events itself and hands them to `here.show` at once,
 * as the in-process bus does, while Redis stores them and tells the other instances (a task
 * reporting progress takes its owner's feed the same way: `ChannelKind.streamed`). A publish
 * still settles only once Redis has stored the event, so a seq a caller is given can be resumed
 * from anywhere.
 */
export class Publisher<P extends { type: string }, E extends Numbered> {
  private readonly leaseMs: number;
  private readonly leaseIdleMs: number;
  private readonly channels = new Map<string, ChannelWrites<E>>();
  /** Channels with something to send at the next flush. */
  private readonly ready = new Set<string>();
  private flushing: NodeJS.Immediate | null = null;
  private confirming: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly idle: NodeJS.Timeout;

  constructor(
    private readonly kind: ChannelKind<P, E>,
    private readonly commands: Redis & Scripts,
    private readonly config: EventsConfig,
    private readonly instance: string,
    private readonly here: Here<E>,
    options: PublisherOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? 2_000;
    this.leaseIdleMs = options.leaseIdleMs ?? 1_000;
    this.idle = setInterval(() => this.sweep(), Math.max(50, this.leaseIdleMs / 2));
    this.idle.unref();
  }

  publish(id: string, payload: P): Promise<E> {
    const w = this.writes(id);
    const now = Date.now();
    w.lastPublishAt = now;
    // A holder far ahead of Redis hands the lease back rather than show more it may not store.
    if (w.lease && w.lease.next - w.lease.confirmed > MAX_AHEAD) w.yielding = true;
    const numbered = w.lease !== null && !w.yielding;
    const at = eventTime(now);
    const event = this.kind.stamp(id, payload, 0, at);
    if (numbered) this.number(w, event);
    const batch = w.lease && !numbered ? (w.later ??= new Batch<E>(false)) : (w.due ??= new Batch<E>(numbered));
    if (this.kind.streamed(payload)) batch.streamed = true;
    const published = new Promise<E>((resolve, reject) => {
      batch.events.push(event);
      batch.json.push(JSON.stringify({ ...payload, at }));
      batch.settle.push({ resolve, reject });
    });
    this.schedule(id);
    return published;
  }

  /** The seq this instance last gave the channel under its lease; null when Redis numbers it. */
  position(id: string): number | null {
    const lease = this.channels.get(id)?.lease;
    return lease ? lease.next - 1 : null;
  }

  holds(id: string) {
    return this.channels.get(id)?.lease != null;
  }

  /** Settles once the events this instance has shown for the channel so far are stored (or refused). */
  async stored(id: string) {
    const w = this.channels.get(id);
    const shown = [w?.sending, w?.due].filter((b): b is Batch<E> => b?.numbered === true);
    await Promise.all(shown.map((b) => b.answered));
  }

  /**
   * Sends what is due, waits (a while at most) for every channel's events to be stored, then
   * hands every lease back: the connection may close after.
   */
  async close() {
    this.closed = true;
    clearInterval(this.idle);
    for (const id of this.channels.keys()) this.ready.add(id);
    this.flush();
    const deadline = Date.now() + CLOSE_WAIT_MS;
    const busy = () => [...this.channels.values()].some((w) => w.sending || w.due || w.later);
    while (busy() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    await Promise.all(
      [...this.channels]
        .filter(([, w]) => w.lease)
        .map(([id]) => this.commands.parleyRelease(ownerKey(this.kind.space, id), this.instance).catch(() => {})),
    );
  }

  private writes(id: string) {
    let w = this.channels.get(id);
    if (!w) this.channels.set(id, (w = new ChannelWrites<E>()));
    return w;
  }

  /**
   * Events numbered here are sent a few milliseconds later, many ticks' worth together: their
   * watchers here have them already, so only other instances wait, and Redis is woken far less.
   */
  private schedule(id: string) {
    this.ready.add(id);
    if (this.flushing) return;
    if (this.channels.get(id)?.due?.numbered) this.confirming ??= setTimeout(() => this.flush(), CONFIRM_EVERY_MS);
    else this.flushing = setImmediate(() => this.flush());
  }

  /** Numbers `event` under the lease and shows it here. */
  private number(w: ChannelWrites<E>, event: E) {
    event.seq = w.lease!.next++;
    this.here.show(event);
  }

  /** Sends every ready channel's due batch, all in one pipeline. */
  private flush() {
    if (this.flushing) clearImmediate(this.flushing);
    if (this.confirming) clearTimeout(this.confirming);
    this.flushing = null;
    this.confirming = null;
    const pipeline = this.commands.pipeline() as unknown as Scripts & { exec(): Promise<[Error | null, unknown][] | null> };
    const sent: Sent<E>[] = [];
    for (const id of this.ready) {
      const w = this.channels.get(id);
      if (!w?.due || w.sending || w.waiting) continue;
      const batch = w.due;
      w.due = null;
      w.sending = batch;
      const mode = w.modeFor(batch, this.closed);
      const { config, instance, leaseMs } = this;
      const expected = batch.numbered ? batch.events[0]!.seq : 0;
      const call = { space: this.kind.space, id, config, instance, mode, expected, leaseMs, events: batch.json };
      pipeline.parleyPublish(...publishArgs(call));
      sent.push({ id, w, batch, mode });
    }
    this.ready.clear();
    if (sent.length === 0) return;
    pipeline.exec().then(
      (results) => sent.forEach((s, i) => this.answer(s, results?.[i] ?? [new Error('Redis did not answer the publish'), null])),
      (error: unknown) => sent.forEach((s) => this.answer(s, [error as Error, null])),
    );
  }

  private answer(s: Sent<E>, [error, result]: [Error | null, unknown]) {
    try {
      const [first, lease, prev] = error ? [Number.NaN, 0, -1] : (result as [number, number, number]);
      if (first === -1) return this.refused(s);
      s.w.backoff = 0;
      if (error || first === -2)
        return this.failed(s, error ?? new Error(`The ${this.kind.noun} was numbered elsewhere while this instance held it`), !!error);
      this.accepted(s, first, lease, prev);
    } catch (error) {
      // One channel's watcher throwing must not leave the others' answers unread.
      if (s.w.sending === s.batch) {
        s.batch.reject(error);
        this.settled(s.id, s.w);
      }
    }
  }

  /** Another instance numbers this channel for now: try again, with what came since behind. */
  private refused({ id, w, batch }: Sent<E>) {
    if (w.due) batch.take(w.due);
    w.due = batch;
    w.waiting = true;
    w.backoff = Math.min(Math.max(w.backoff * 2, 1), 10);
    setTimeout(() => {
      w.waiting = false;
      this.settled(id, w);
    }, w.backoff).unref();
  }

  /** Redis failed the call, or refused a confirmation (-2): nothing of the batch is stored. */
  private failed({ id, w, batch, mode }: Sent<E>, why: Error, unreachable: boolean) {
    batch.reject(why);
    if (mode === WriteMode.confirm) {
      // Watchers here were shown events Redis may not hold: they read the channel again, and
      // whatever follows is numbered past anything they saw.
      w.lease = null;
      w.yielding = false;
      w.skipSince = Date.now();
      if (w.due?.numbered) {
        w.due.reject(why);
        w.due = null;
      }
      w.due ??= w.later;
      w.later = null;
      this.here.lost(id);
      this.here.released(id);
    }
    if (unreachable && this.commands.status !== 'ready') {
      // Redis is out of reach: what waited behind this call fails with it now, instead of each
      // call after it waiting out a retry budget of its own (they add up to many seconds).
      w.due?.reject(why);
      w.due = null;
    }
    this.settled(id, w);
  }

  /** Stored from seq `first`: the callers learn their seqs, and a lease granted or kept is noted. */
  private accepted({ id, w, batch, mode }: Sent<E>, first: number, lease: number, prev: number) {
    if (!batch.numbered) {
      batch.events.forEach((e, i) => (e.seq = first + i));
      if (prev >= 0) batch.events[0]!.prev = prev;
    }
    if (mode === WriteMode.skip) w.skipSince = null;
    if (mode === WriteMode.confirm) {
      w.lease!.confirmed = first + batch.events.length - 1;
      if (lease === 2) w.yielding = true;
    } else if (lease === 1) {
      // Granted: from here this instance numbers the channel, what was published since included.
      w.lease = { next: first + batch.events.length, confirmed: first + batch.events.length - 1 };
      for (const e of batch.events) this.here.show(e);
      if (w.due) {
        for (const e of w.due.events) this.number(w, e);
        w.due.numbered = true;
      }
    }
    batch.resolve();
    this.settled(id, w);
  }

  /** The channel's call is answered: send what is due, hand a yielded lease back, or forget the channel. */
  private settled(id: string, w: ChannelWrites<E>) {
    w.sending = null;
    if (w.due) this.schedule(id);
    else if (w.lease && w.yielding) this.release(id, w);
    else if (!w.lease && !w.later && !w.waiting && w.skipSince === null) this.channels.delete(id);
  }

  /**
   * Hands the lease back; what was published meanwhile goes after, numbered by Redis. Nothing waits
   * for the answer: one connection keeps order, so whatever is sent next runs after the release.
   */
  private release(id: string, w: ChannelWrites<E>) {
    w.lease = null;
    w.yielding = false;
    w.due = w.later;
    w.later = null;
    void this.commands.parleyRelease(ownerKey(this.kind.space, id), this.instance).catch(() => {});
    this.here.released(id);
    this.settled(id, w);
  }

  /**
   * A lease nothing was published under for a while goes back, so that other instances number
   * the channel again without waiting for it to run out. A channel whose numbers must skip is
   * remembered until Redis has forgotten the channel anyway.
   */
  private sweep() {
    const now = Date.now();
    for (const [id, w] of this.channels) {
      if (w.lease && !w.sending && !w.due && w.lastPublishAt < now - this.leaseIdleMs) this.release(id, w);
      else if (!w.lease && !w.sending && !w.due && w.skipSince !== null && w.skipSince < now - this.config.idleTtlMs)
        this.channels.delete(id);
    }
  }
}
