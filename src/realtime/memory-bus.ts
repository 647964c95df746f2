import type { EventsConfig } from '../config.ts';
import type { CancelRequest, EventBus, EventChannels, Numbered, SubscribeOptions } from '../domain/core/bus.ts';
import { type ChannelKind, type Ends, feedKind, sessionKind } from './channel-kind.ts';
import { eventTime } from './event-time.ts';
import { type EventSource, Listeners, ReplayWindow, Subscriber } from './subscription.ts';

/**
 * A channel's events in this process: the window is the whole log. The first seq comes from the
 * clock (in microseconds): a channel forgotten and made again never reuses a number a client may hold.
 */
class Channel<E extends Numbered> implements EventSource<E> {
  readonly window: ReplayWindow<E>;
  readonly ready = Promise.resolve();
  readonly subscribers = new Set<Subscriber<E>>();
  readonly ends: Ends;
  lastEventAt = Date.now();

  constructor(kind: ChannelKind<never, E>, config: EventsConfig) {
    this.window = new ReplayWindow(config.replayLimit, Date.now() * 1000, config.replayBytes, kind.sizeOf);
    this.ends = kind.ends;
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

  append(event: E, now: number) {
    this.window.push(event);
    this.lastEventAt = now;
    for (const s of this.subscribers) s.wake();
  }
}

/** What every kind's channels share in one bus: the count of subscriptions, and whether it closed. */
interface Shared {
  subscribers: number;
  closed: boolean;
}

/** One kind of channel in this process, each with a bounded replay log. */
function memoryChannels<P extends { type: string }, E extends Numbered>(kind: ChannelKind<P, E>, config: EventsConfig, shared: Shared) {
  const channels = new Map<string, Channel<E>>();

  const channel = (id: string) => {
    let c = channels.get(id);
    if (!c) channels.set(id, (c = new Channel(kind, config)));
    return c;
  };

  const events: EventChannels<P, E> = {
    async publish(id, payload) {
      const c = channel(id);
      const now = Date.now();
      const event = kind.stamp(id, payload, c.seq + 1, eventTime(now));
      c.append(event, now);
      return event;
    },

    subscribe(id: string, options: SubscribeOptions = {}) {
      const c = channel(id);
      const subscriber = new Subscriber(c, options.after, c.seq, (s) => {
        if (c.subscribers.delete(s)) shared.subscribers--;
      });
      c.subscribers.add(subscriber);
      shared.subscribers++;
      if (shared.closed) subscriber.end(kind.ends.shuttingDown(null));
      return subscriber;
    },

    position: async (id) => channel(id).seq,
  };

  return {
    events,
    /**
     * Channels nobody watches and nothing happens in are forgotten after a while, with their
     * replay log (a later resume gets EVENTS_EXPIRED and reads the state again).
     */
    sweep(cutoff: number) {
      for (const [id, c] of channels) if (c.subscribers.size === 0 && c.lastEventAt < cutoff) channels.delete(id);
    },
    close() {
      for (const c of channels.values()) for (const s of c.subscribers) s.end(kind.ends.shuttingDown(null));
    },
  };
}

/** The in-process event bus: one instance's sessions and users' feeds, each with a bounded replay log. */
export function createMemoryBus(config: EventsConfig): EventBus {
  const shared: Shared = { subscribers: 0, closed: false };
  const sessions = memoryChannels(sessionKind, config, shared);
  const feeds = memoryChannels(feedKind, config, shared);
  const revokedKeys = new Listeners<string>();
  const cancels = new Listeners<CancelRequest>();

  const sweep = setInterval(
    () => {
      const cutoff = Date.now() - config.idleTtlMs;
      sessions.sweep(cutoff);
      feeds.sweep(cutoff);
    },
    Math.min(config.idleTtlMs, 60_000),
  );
  sweep.unref();

  return {
    ...sessions.events,
    feeds: feeds.events,

    async revokeKey(keyId: string) {
      revokedKeys.emit(keyId);
    },

    onKeyRevoked: (listener) => revokedKeys.add(listener),

    async cancelReplies(request) {
      cancels.emit(request);
    },

    onCancelReplies: (listener) => cancels.add(listener),

    async close() {
      shared.closed = true;
      clearInterval(sweep);
      sessions.close();
      feeds.close();
    },

    describe: async () => ({ events: 'in process (one instance; set REDIS_URL to share events between instances)', reachable: true }),

    subscriberCount: () => shared.subscribers,
  };
}
