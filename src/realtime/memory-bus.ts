import type { EventsConfig } from '../config.ts';
import type { SessionEvent, SessionEventPayload } from '../domain/sessions/events.ts';
import type { BusItem, BusSubscription, CancelRequest, EventBus, StreamEnd, SubscribeOptions } from './bus.ts';

/**
 * A session's events in this process. Seqs are consecutive within a channel, so a subscriber's
 * position maps straight to an index in the log. The first seq comes from the clock (in
 * microseconds): a channel forgotten and made again never reuses a number a client may hold.
 */
class Channel {
  seq = Date.now() * 1000;
  log: SessionEvent[] = [];
  readonly subscribers = new Set<Subscriber>();
  lastEventAt = Date.now();

  constructor(private readonly retain: number) {}

  append(event: SessionEvent) {
    this.log.push(event);
    // Trimmed in steps, so appending stays O(1) on average.
    if (this.log.length > this.retain + (this.retain >> 2)) this.log.splice(0, this.log.length - this.retain);
    this.lastEventAt = Date.now();
  }

  /** The event after `seq`, `null` if none yet, `undefined` if it is no longer retained. */
  after(seq: number): SessionEvent | null | undefined {
    const first = this.log[0]?.seq ?? this.seq + 1;
    const index = seq + 1 - first;
    if (index < 0) return undefined;
    return this.log[index] ?? null;
  }
}

/**
 * One subscription: a position in its channel's log, so it holds no events of its own and a
 * consumer that stops reading costs nothing here. One that falls so far behind that the log no
 * longer has its next event is ended with SLOW_CONSUMER (it re-reads the session). An end
 * (shutdown, say) is delivered before any event still waiting.
 */
class Subscriber implements BusSubscription {
  private waiting: ((r: IteratorResult<BusItem>) => void) | null = null;
  private final: StreamEnd | null = null;
  private done = false;

  constructor(
    private readonly channel: Channel,
    /** Seq of the last event handed to the consumer. */
    private position: number,
    private readonly onClose: (s: Subscriber) => void,
  ) {}

  /** Ends the stream with a reason, delivered at the consumer's next read. */
  end(code: StreamEnd['code'], reason: string) {
    if (this.final || this.done) return;
    this.final = { end: true, code, reason, lastSeq: this.position };
    this.wake();
  }

  wake() {
    if (!this.waiting) return;
    const item = this.pull();
    if (!item) return;
    const resolve = this.waiting;
    this.waiting = null;
    resolve(item);
  }

  private pull(): IteratorResult<BusItem> | null {
    if (this.done) return { value: undefined, done: true };
    const next = this.final ? null : this.channel.after(this.position);
    if (next) {
      this.position = next.seq;
      return { value: next, done: false };
    }
    if (next === undefined) {
      this.final = {
        end: true,
        code: 'SLOW_CONSUMER',
        reason: 'The client fell so far behind that the events it missed are gone; read the session again',
        lastSeq: this.position,
      };
    }
    if (this.final) {
      const final = this.final;
      this.finish();
      return { value: final, done: false };
    }
    return null;
  }

  private finish() {
    if (this.done) return;
    this.done = true;
    this.onClose(this);
  }

  next(): Promise<IteratorResult<BusItem>> {
    const item = this.pull();
    if (item) return Promise.resolve(item);
    return new Promise((resolve) => (this.waiting = resolve));
  }

  close() {
    this.finish();
    const resolve = this.waiting;
    this.waiting = null;
    resolve?.({ value: undefined, done: true });
  }

  return(): Promise<IteratorResult<BusItem>> {
    this.close();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

/** The in-process event bus: one instance's sessions, each with a bounded replay log. */
export function createMemoryBus(config: EventsConfig): EventBus {
  const channels = new Map<string, Channel>();
  const keyListeners = new Set<(keyId: string) => void>();
  const cancelListeners = new Set<(request: CancelRequest) => void>();
  let subscriberCount = 0;
  let closed = false;

  const channel = (sessionId: string) => {
    let c = channels.get(sessionId);
    if (!c) channels.set(sessionId, (c = new Channel(config.replayLimit)));
    return c;
  };

  // Sessions nobody watches and nothing happens in are forgotten after a while, with their
  // replay log (a later resume gets EVENTS_EXPIRED and re-reads the session).
  const sweep = setInterval(
    () => {
      const cutoff = Date.now() - config.idleTtlMs;
      for (const [id, c] of channels) if (c.subscribers.size === 0 && c.lastEventAt < cutoff) channels.delete(id);
    },
    Math.min(config.idleTtlMs, 60_000),
  );
  sweep.unref();

  return {
    async publish(sessionId: string, payload: SessionEventPayload) {
      const c = channel(sessionId);
      const event = { ...payload, seq: ++c.seq, sessionId, at: new Date().toISOString() } as SessionEvent;
      c.append(event);
      for (const s of c.subscribers) s.wake();
      return event;
    },

    subscribe(sessionId: string, options: SubscribeOptions = {}) {
      const c = channel(sessionId);
      const { after } = options;
      const subscriber = new Subscriber(c, after ?? c.seq, (s) => {
        if (c.subscribers.delete(s)) subscriberCount--;
      });
      c.subscribers.add(subscriber);
      subscriberCount++;
      if (closed) subscriber.end('SHUTTING_DOWN', 'The server is shutting down; reconnect to resume');
      // A seq this channel never issued comes from an earlier life of the server, and one older
      // than the log is a gap: either way the client must re-read the session.
      else if (after !== undefined && (after > c.seq || c.after(after) === undefined)) {
        subscriber.end(
          'EVENTS_EXPIRED',
          `Events after ${after} are no longer available; read the session again and subscribe without "after"`,
        );
      }
      return subscriber;
    },

    async revokeKey(keyId: string) {
      for (const listener of keyListeners) listener(keyId);
    },

    onKeyRevoked(listener) {
      keyListeners.add(listener);
      return () => keyListeners.delete(listener);
    },

    async cancelReplies(request) {
      for (const listener of cancelListeners) listener(request);
    },

    onCancelReplies(listener) {
      cancelListeners.add(listener);
      return () => cancelListeners.delete(listener);
    },

    async close() {
      closed = true;
      clearInterval(sweep);
      for (const c of channels.values())
        for (const s of c.subscribers) s.end('SHUTTING_DOWN', 'The server is shutting down; reconnect to resume');
    },

    describe: async () => ({ events: 'in process (one instance; set REDIS_URL to share events between instances)', reachable: true }),

    subscriberCount: () => subscriberCount,
  };
}
