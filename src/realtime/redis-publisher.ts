import type { Redis } from 'ioredis';
import type { EventsConfig } from '../config.ts';
import type { SessionEvent, SessionEventPayload } from '../domain/core/events.ts';
import { MAX_AHEAD, ownerKey, publishArgs, type Scripts, WriteMode } from './redis-scripts.ts';

/** Events a reply streams many of: publishing one asks for the session's lease. */
const streamed = (payload: SessionEventPayload) => payload.type === 'assistant_token' || payload.type === 'assistant_thinking';

/** Events published together for one session, and the callers waiting for them to be stored. */
class Batch {
  readonly events: SessionEvent[] = [];
  readonly json: string[] = [];
  readonly settle: { resolve(event: SessionEvent): void; reject(e: unknown): void }[] = [];
  private finish!: () => void;
  /** Settles once Redis has answered for the batch (stored or refused). */
  readonly answered = new Promise<void>((resolve) => (this.finish = resolve));

  /** `numbered`: numbered here under the lease, shown to watchers here already; Redis only stores them. */
  constructor(public numbered: boolean) {}

  take(other: Batch) {
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

/** How this instance is publishing to one session. */
class SessionWrites {
  /** Events published and not yet sent, in order. */
  due: Batch | null = null;
  /** The call for this session on its way: the next waits for its answer, so order holds. */
  sending: Batch | null = null;
  /** While held, the next seq this instance gives and the last one Redis confirmed. */
  lease: { next: number; confirmed: number } | null = null;
  /** The lease goes back once what was numbered under it is confirmed; events meanwhile wait here. */
  yielding = false;
  later: Batch | null = null;
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
  modeFor(batch: Batch, closing: boolean): WriteMode {
    if (batch.numbered) return WriteMode.confirm;
    if (this.skipSince !== null) return WriteMode.skip;
    return !closing && batch.events.some(streamed) ? WriteMode.lease : WriteMode.redis;
  }
}

/** A batch on its way to Redis, and how it was written. */
interface Sent {
  sessionId: string;
  w: SessionWrites;
  batch: Batch;
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
 * shown; `released` once the session's lease is no longer held here.
 */
export interface Here {
  show(event: SessionEvent): void;
  lost(sessionId: string): void;
  released(sessionId: string): void;
}

/** How long events numbered here may wait to be sent to Redis (see `schedule`). */
const CONFIRM_EVERY_MS = 5;

/** How long shutdown waits for what was published to be stored. */
const CLOSE_WAIT_MS = 5_000;

/**
 * Publishes session events through Redis. What one instance publishes for a session in a tick
 * goes in one script call, every session's in one pipeline; a session has one call on its way
 * at a time, so its events keep the order they were published in.
 *
 * A reply streaming tokens would otherwise wait a round trip to Redis (and for Redis to get a
 * core) before its own watchers see each token. So the instance writing a reply takes the
 * session's lease: it numbers the session's events itself and hands them to `here.show` at once,
 * as the in-process bus does, while Redis stores them and tells the other instances. A publish
 * still settles only once Redis has stored the event, so a seq a caller is given can be resumed
 * from anywhere.
 */
export class Publisher {
  private readonly leaseMs: number;
  private readonly leaseIdleMs: number;
  private readonly sessions = new Map<string, SessionWrites>();
  /** Sessions with something to send at the next flush. */
  private readonly ready = new Set<string>();
  private flushing: NodeJS.Immediate | null = null;
  private confirming: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly idle: NodeJS.Timeout;

  constructor(
    private readonly commands: Redis & Scripts,
    private readonly config: EventsConfig,
    private readonly instance: string,
    private readonly here: Here,
    options: PublisherOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? 2_000;
    this.leaseIdleMs = options.leaseIdleMs ?? 1_000;
    this.idle = setInterval(() => this.sweep(), Math.max(50, this.leaseIdleMs / 2));
    this.idle.unref();
  }

  publish(sessionId: string, payload: SessionEventPayload): Promise<SessionEvent> {
    const w = this.writes(sessionId);
    w.lastPublishAt = Date.now();
    // A holder far ahead of Redis hands the lease back rather than show more it may not store.
    if (w.lease && w.lease.next - w.lease.confirmed > MAX_AHEAD) w.yielding = true;
    const numbered = w.lease !== null && !w.yielding;
    const at = new Date().toISOString();
    const event = { ...payload, at, seq: 0, sessionId } as SessionEvent;
    if (numbered) this.number(w, event);
    const batch = w.lease && !numbered ? (w.later ??= new Batch(false)) : (w.due ??= new Batch(numbered));
    const published = new Promise<SessionEvent>((resolve, reject) => {
      batch.events.push(event);
      batch.json.push(JSON.stringify({ ...payload, at }));
      batch.settle.push({ resolve, reject });
    });
    this.schedule(sessionId);
    return published;
  }

  /** The seq this instance last gave the session under its lease; null when Redis numbers it. */
  position(sessionId: string): number | null {
    const lease = this.sessions.get(sessionId)?.lease;
    return lease ? lease.next - 1 : null;
  }

  holds(sessionId: string) {
    return this.sessions.get(sessionId)?.lease != null;
  }

  /** Settles once the events this instance has shown for the session so far are stored (or refused). */
  async stored(sessionId: string) {
    const w = this.sessions.get(sessionId);
    const shown = [w?.sending, w?.due].filter((b): b is Batch => b?.numbered === true);
    await Promise.all(shown.map((b) => b.answered));
  }

  /**
   * Sends what is due, waits (a while at most) for every session's events to be stored, then
   * hands every lease back: the connection may close after.
   */
  async close() {
    this.closed = true;
    clearInterval(this.idle);
    for (const sessionId of this.sessions.keys()) this.ready.add(sessionId);
    this.flush();
    const deadline = Date.now() + CLOSE_WAIT_MS;
    const busy = () => [...this.sessions.values()].some((w) => w.sending || w.due || w.later);
    while (busy() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    await Promise.all(
      [...this.sessions]
        .filter(([, w]) => w.lease)
        .map(([sessionId]) => this.commands.parleyRelease(ownerKey(sessionId), this.instance).catch(() => {})),
    );
  }

  private writes(sessionId: string) {
    let w = this.sessions.get(sessionId);
    if (!w) this.sessions.set(sessionId, (w = new SessionWrites()));
    return w;
  }

  /**
   * Events numbered here are sent a few milliseconds later, many ticks' worth together: their
   * watchers here have them already, so only other instances wait, and Redis is woken far less.
   */
  private schedule(sessionId: string) {
    this.ready.add(sessionId);
    if (this.flushing) return;
    if (this.sessions.get(sessionId)?.due?.numbered) this.confirming ??= setTimeout(() => this.flush(), CONFIRM_EVERY_MS);
    else this.flushing = setImmediate(() => this.flush());
  }

  /** Numbers `event` under the lease and shows it here. */
  private number(w: SessionWrites, event: SessionEvent) {
    event.seq = w.lease!.next++;
    this.here.show(event);
  }

  /** Sends every ready session's due batch, all in one pipeline. */
  private flush() {
    if (this.flushing) clearImmediate(this.flushing);
    if (this.confirming) clearTimeout(this.confirming);
    this.flushing = null;
    this.confirming = null;
    const pipeline = this.commands.pipeline() as unknown as Scripts & { exec(): Promise<[Error | null, unknown][] | null> };
    const sent: Sent[] = [];
    for (const sessionId of this.ready) {
      const w = this.sessions.get(sessionId);
      if (!w?.due || w.sending || w.waiting) continue;
      const batch = w.due;
      w.due = null;
      w.sending = batch;
      const mode = w.modeFor(batch, this.closed);
      const { config, instance, leaseMs } = this;
      const expected = batch.numbered ? batch.events[0]!.seq : 0;
      pipeline.parleyPublish(...publishArgs({ sessionId, config, instance, mode, expected, leaseMs, events: batch.json }));
      sent.push({ sessionId, w, batch, mode });
    }
    this.ready.clear();
    if (sent.length === 0) return;
    pipeline.exec().then(
      (results) => sent.forEach((s, i) => this.answer(s, results?.[i] ?? [new Error('Redis did not answer the publish'), null])),
      (error: unknown) => sent.forEach((s) => this.answer(s, [error as Error, null])),
    );
  }

  private answer(s: Sent, [error, result]: [Error | null, unknown]) {
    try {
      const [first, lease, prev] = error ? [Number.NaN, 0, -1] : (result as [number, number, number]);
      if (first === -1) return this.refused(s);
      s.w.backoff = 0;
      if (error || first === -2)
        return this.failed(s, error ?? new Error('The session was numbered elsewhere while this instance held it'), !!error);
      this.accepted(s, first, lease, prev);
    } catch (error) {
      // One session's watcher throwing must not leave the others' answers unread.
      if (s.w.sending === s.batch) {
        s.batch.reject(error);
        this.settled(s.sessionId, s.w);
      }
    }
  }

  /** Another instance numbers this session for now: try again, with what came since behind. */
  private refused({ sessionId, w, batch }: Sent) {
    if (w.due) batch.take(w.due);
    w.due = batch;
    w.waiting = true;
    w.backoff = Math.min(Math.max(w.backoff * 2, 1), 10);
    setTimeout(() => {
      w.waiting = false;
      this.settled(sessionId, w);
    }, w.backoff).unref();
  }

  /** Redis failed the call, or refused a confirmation (-2): nothing of the batch is stored. */
  private failed({ sessionId, w, batch, mode }: Sent, why: Error, unreachable: boolean) {
    batch.reject(why);
    if (mode === WriteMode.confirm) {
      // Watchers here were shown events Redis may not hold: they read the session again, and
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
      this.here.lost(sessionId);
      this.here.released(sessionId);
    }
    if (unreachable && this.commands.status !== 'ready') {
      // Redis is out of reach: what waited behind this call fails with it now, instead of each
      // call after it waiting out a retry budget of its own (they add up to many seconds).
      w.due?.reject(why);
      w.due = null;
    }
    this.settled(sessionId, w);
  }

  /** Stored from seq `first`: the callers learn their seqs, and a lease granted or kept is noted. */
  private accepted({ sessionId, w, batch, mode }: Sent, first: number, lease: number, prev: number) {
    if (!batch.numbered) {
      batch.events.forEach((e, i) => (e.seq = first + i));
      if (prev >= 0) batch.events[0]!.prev = prev;
    }
    if (mode === WriteMode.skip) w.skipSince = null;
    if (mode === WriteMode.confirm) {
      w.lease!.confirmed = first + batch.events.length - 1;
      if (lease === 2) w.yielding = true;
    } else if (lease === 1) {
      // Granted: from here this instance numbers the session, what was published since included.
      w.lease = { next: first + batch.events.length, confirmed: first + batch.events.length - 1 };
      for (const e of batch.events) this.here.show(e);
      if (w.due) {
        for (const e of w.due.events) this.number(w, e);
        w.due.numbered = true;
      }
    }
    batch.resolve();
    this.settled(sessionId, w);
  }

  /** The session's call is answered: send what is due, hand a yielded lease back, or forget the session. */
  private settled(sessionId: string, w: SessionWrites) {
    w.sending = null;
    if (w.due) this.schedule(sessionId);
    else if (w.lease && w.yielding) this.release(sessionId, w);
    else if (!w.lease && !w.later && !w.waiting && w.skipSince === null) this.sessions.delete(sessionId);
  }

  /**
   * Hands the lease back; what was published meanwhile goes after, numbered by Redis. Nothing waits
   * for the answer: one connection keeps order, so whatever is sent next runs after the release.
   */
  private release(sessionId: string, w: SessionWrites) {
    w.lease = null;
    w.yielding = false;
    w.due = w.later;
    w.later = null;
    void this.commands.parleyRelease(ownerKey(sessionId), this.instance).catch(() => {});
    this.here.released(sessionId);
    this.settled(sessionId, w);
  }

  /**
   * A lease nothing was published under for a while goes back, so that other instances number
   * the session again without waiting for it to run out. A session whose numbers must skip is
   * remembered until Redis has forgotten the session anyway.
   */
  private sweep() {
    const now = Date.now();
    for (const [sessionId, w] of this.sessions) {
      if (w.lease && !w.sending && !w.due && w.lastPublishAt < now - this.leaseIdleMs) this.release(sessionId, w);
      else if (!w.lease && !w.sending && !w.due && w.skipSince !== null && w.skipSince < now - this.config.idleTtlMs)
        this.sessions.delete(sessionId);
    }
  }
}
