import type { EventsConfig } from '../config.ts';
import type { CancelRequest, EventBus, SubscribeOptions } from '../domain/core/bus.ts';
import type { SessionEvent, SessionEventPayload } from '../domain/core/events.ts';
import { type EventSource, ends, Listeners, ReplayWindow, Subscriber } from './subscription.ts';

/**
 * A session's events in this process: the window is the whole log. The first seq comes from the
 * clock (in microseconds): a channel forgotten and made again never reuses a number a client may hold.
 */
class Channel implements EventSource {
  readonly window: ReplayWindow;
  readonly ready = Promise.resolve();
  readonly subscribers = new Set<Subscriber>();
  lastEventAt = Date.now();

  constructor(retain: number, retainBytes: number) {
    this.window = new ReplayWindow(retain, Date.now() * 1000, retainBytes);
  }

  get seq() {
    return this.window.last!;
  }

  current() {
    return this.seq;
  }

  /** Nothing lies behind the window in this process. */
  async range() {
    return [];
  }

  append(event: SessionEvent) {
    this.window.push(event);
    this.lastEventAt = Date.now();
    for (const s of this.subscribers) s.wake();
  }
}

/** The in-process event bus: one instance's sessions, each with a bounded replay log. */
export function createMemoryBus(config: EventsConfig): EventBus {
  const channels = new Map<string, Channel>();
  const revokedKeys = new Listeners<string>();
  const cancels = new Listeners<CancelRequest>();
  let subscriberCount = 0;
  let closed = false;

  const channel = (sessionId: string) => {
    let c = channels.get(sessionId);
    if (!c) channels.set(sessionId, (c = new Channel(config.replayLimit, config.replayBytes)));
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
      const event = { ...payload, seq: c.seq + 1, sessionId, at: new Date().toISOString() } as SessionEvent;
      c.append(event);
      return event;
    },

    subscribe(sessionId: string, options: SubscribeOptions = {}) {
      const c = channel(sessionId);
      const subscriber = new Subscriber(c, options.after, c.seq, (s) => {
        if (c.subscribers.delete(s)) subscriberCount--;
      });
      c.subscribers.add(subscriber);
      subscriberCount++;
      if (closed) subscriber.end(ends.shuttingDown(null));
      return subscriber;
    },

    position: async (sessionId) => channel(sessionId).seq,

    async revokeKey(keyId: string) {
      revokedKeys.emit(keyId);
    },

    onKeyRevoked: (listener) => revokedKeys.add(listener),

    async cancelReplies(request) {
      cancels.emit(request);
    },

    onCancelReplies: (listener) => cancels.add(listener),

    async close() {
      closed = true;
      clearInterval(sweep);
      for (const c of channels.values()) for (const s of c.subscribers) s.end(ends.shuttingDown(null));
    },

    describe: async () => ({ events: 'in process (one instance; set REDIS_URL to share events between instances)', reachable: true }),

    subscriberCount: () => subscriberCount,
  };
}
