import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { EventsConfig } from '../config.ts';
import type { WarnLog } from '../limits/throttled-log.ts';
import { connectRedis } from '../redis/client.ts';
import { type ChannelKind, type Ends, feedKind, sessionKind } from './channel-kind.ts';
import { Publisher, type PublisherOptions } from './redis-publisher.ts';
import { defineScripts, livePrefix, type Scripts, seqKey, streamKey } from './redis-scripts.ts';
import { type EventSource, Listeners, ReplayWindow, Subscriber } from './subscription.ts';
import type { CancelRequest, EventBus, EventChannels, Numbered, SubscribeOptions } from '../domain/core/bus.ts';
import { within } from '../domain/core/within.ts';

const CONTROL = 'parley:control';

type Entry = [id: string, fields: string[]];

/**
 * A channel (a session, a user's feed) as this instance sees it: the events that arrived live
 * since someone here started watching (the window), in front of the Redis stream that holds the rest.
 */
class Channel<E extends Numbered> implements EventSource<E> {
  readonly window: ReplayWindow<E>;
  readonly subscribers = new Set<Subscriber<E>>();
  /** Incoming events are handled one after another: a gap is filled before what follows it. */
  queue: Promise<void> = Promise.resolve();
  ready: Promise<void>;
  readonly ends: Ends;

  constructor(
    readonly id: string,
    kind: ChannelKind<never, E>,
    config: EventsConfig,
    private readonly reader: Reader<E>,
    init: (c: Channel<E>) => Promise<void>,
  ) {
    this.window = new ReplayWindow(config.replayLimit, null, config.replayBytes, kind.sizeOf);
    this.ends = kind.ends;
    this.ready = init(this);
  }

  current() {
    return this.reader.current(this.id);
  }

  range(fromSeq: number, count: number) {
    return this.reader.range(this.id, fromSeq, count);
  }

  append(event: E) {
    if (this.window.push(event)) for (const s of this.subscribers) s.wake();
  }

  /**
   * Events this instance showed here were refused by Redis: their watchers are told to read the
   * channel's state again, and the window starts again from where Redis has the channel.
   */
  renumbered() {
    this.window.clear();
    for (const s of this.subscribers) s.end(this.ends.unstored(null));
    this.ready = Promise.resolve(this.reader.current(this.id)).then(
      (at) => this.window.advance(at),
      () => {},
    );
  }
}

/** Where a channel reads what its window does not hold. */
interface Reader<E extends Numbered> {
  range(id: string, fromSeq: number, count: number): Promise<E[]>;
  current(id: string): number | Promise<number>;
  /** Events from after the window's last up to (not including) `untilSeq`, in order, to close a gap. */
  catchUp(c: Channel<E>, untilSeq?: number): Promise<void>;
}

type Signal = { type: 'revoke_key'; keyId: string } | ({ type: 'cancel' } & CancelRequest);

/**
 * What every instance must act on, whichever one was asked: a deleted key closes its sockets
 * everywhere, and a cancel stops a reply wherever it is being written. Acted on here at once, and
 * sent to the other instances on one pub/sub channel.
 */
class ControlSignals {
  readonly revokedKeys = new Listeners<string>();
  readonly cancels = new Listeners<CancelRequest>();

  constructor(
    private readonly commands: Redis,
    private readonly instance: string,
  ) {}

  async revokeKey(keyId: string) {
    this.revokedKeys.emit(keyId);
    await this.send({ type: 'revoke_key', keyId });
  }

  async cancelReplies(request: CancelRequest) {
    this.cancels.emit(request);
    await this.send({ type: 'cancel', ...request });
  }

  /** A signal on the channel; this instance's own come back too, and were acted on already. */
  receive(message: string) {
    const signal = JSON.parse(message) as { from: string } & Signal;
    if (signal.from === this.instance) return;
    if (signal.type === 'revoke_key') this.revokedKeys.emit(signal.keyId);
    else this.cancels.emit({ sessionId: signal.sessionId, promptId: signal.promptId, reason: signal.reason });
  }

  private async send(signal: Signal) {
    await this.commands.publish(CONTROL, JSON.stringify({ ...signal, from: this.instance }));
  }
}

/** What every kind of channel on one bus shares: the two connections, the settings, and the count of subscriptions. */
interface Shared {
  commands: Redis & Scripts;
  listener: Redis;
  instance: string;
  config: EventsConfig;
  leases: PublisherOptions;
  state: { subscribers: number; closed: boolean };
}

/**
 * Live events shared by every instance through Redis. Each event goes into its channel's Redis
 * Stream (the replay log, bounded by EVENT_REPLAY_LIMIT and forgotten after EVENT_IDLE_TTL_MS of
 * quiet) and out on a pub/sub channel to the instances whose clients watch that channel. Resuming
 * with `after` reads the stream, so it works on any instance and across restarts of parley.
 * Pub/sub can drop messages while a connection is re-established: seqs are consecutive, so a gap
 * is seen and filled from the stream. Sessions and users' feeds are two kinds of channel on the
 * same two connections (`docs/decisions.md`, "Users' feeds").
 */
export function createRedisBus(url: string, config: EventsConfig, keyPrefix = '', log?: WarnLog, leases: PublisherOptions = {}): EventBus {
  const instance = randomUUID();
  const commands = defineScripts(connectRedis(url, 'events', keyPrefix, log));
  const listener = connectRedis(url, 'events-listener', keyPrefix, log);
  const shared: Shared = { commands, listener, instance, config, leases, state: { subscribers: 0, closed: false } };
  const sessions = redisChannels(sessionKind, shared);
  const feeds = redisChannels(feedKind, shared);
  const kinds = [sessions, feeds];
  const control = new ControlSignals(commands, instance);

  listener.on('message', (name: string, message: string) => {
    if (name === CONTROL) return control.receive(message);
    for (const kind of kinds) if (kind.receive(name, message)) return;
  });
  // After a reconnect (ioredis subscribes again by itself) events may have gone by unseen.
  listener.on('ready', () => {
    for (const kind of kinds) kind.catchUp();
  });
  // Rejected only when the bus is closed before Redis took it (a close right after the start):
  // until then ioredis holds the command, and subscribes again by itself after a reconnect.
  listener.subscribe(CONTROL).catch(() => {});

  // Channels someone here watches keep their seq alive, so a quiet hour does not restart it.
  const keepAlive = setInterval(
    () => {
      for (const kind of kinds) kind.keepAlive();
    },
    Math.max(1_000, Math.floor(config.idleTtlMs / 3)),
  );
  keepAlive.unref();

  return {
    ...sessions.events,
    feeds: feeds.events,

    revokeKey: (keyId: string) => control.revokeKey(keyId),

    onKeyRevoked: (l) => control.revokedKeys.add(l),

    cancelReplies: (request: CancelRequest) => control.cancelReplies(request),

    onCancelReplies: (l) => control.cancels.add(l),

    async close() {
      if (shared.state.closed) return;
      shared.state.closed = true;
      clearInterval(keepAlive);
      for (const kind of kinds) kind.endAll();
      // Subscribers read their final item from memory; the connections can go once what was
      // published is stored.
      listener.disconnect();
      await Promise.all(kinds.map((kind) => kind.publisher.close()));
      await commands.quit().catch(() => commands.disconnect());
    },

    async describe() {
      const where = new URL(url);
      const events = `Redis at ${where.hostname}:${where.port || 6379} (shared by every instance)`;
      const answered = commands.ping().then(() => true);
      const reachable = await within(answered, 1_000, false).catch(() => false);
      return { events, reachable };
    },

    subscriberCount: () => shared.state.subscribers,
  };
}

/** One kind of channel on the bus's connections: its channels watched here, its publisher, its live messages. */
function redisChannels<P extends { type: string }, E extends Numbered>(kind: ChannelKind<P, E>, shared: Shared) {
  const { commands, listener, instance, config, state } = shared;
  const live = livePrefix(kind.space);
  const channels = new Map<string, Channel<E>>();
  const publisher = new Publisher(
    kind,
    commands,
    config,
    instance,
    {
      show: (event) => channels.get(kind.channelOf(event))?.append(event),
      lost: (id) => channels.get(id)?.renumbered(),
      released(id) {
        const c = channels.get(id);
        if (c) forget(c);
      },
    },
    shared.leases,
  );
  const reader = streamReader(kind, commands, publisher, config.idleTtlMs);

  function channel(id: string) {
    let c = channels.get(id);
    if (!c) {
      c = new Channel(id, kind, config, reader, async (ch) => {
        await listener.subscribe(live + id);
        // Whatever was published before the subscription took effect is read from the stream
        // (once what this instance numbered itself is stored there); what this instance numbers
        // from now on is in the window already.
        await publisher.stored(id);
        ch.window.advance(await reader.current(id));
      });
      channels.set(id, c);
    }
    return c;
  }

  /** A channel this instance numbers keeps its window: a watcher resuming here finds what Redis may not hold yet. */
  function forget(c: Channel<E>) {
    if (c.subscribers.size > 0 || channels.get(c.id) !== c || publisher.holds(c.id)) return;
    channels.delete(c.id);
    void listener.unsubscribe(live + c.id).catch(() => {});
  }

  const events: EventChannels<P, E> = {
    publish: (id, payload) => publisher.publish(id, payload),

    subscribe(id: string, options: SubscribeOptions = {}) {
      const c = channel(id);
      // Asked now, on the connection later publishes go through: nothing published after this
      // call is missed, however long the pub/sub subscription takes.
      const start = options.after === undefined ? reader.current(id) : undefined;
      const subscriber = new Subscriber(c, options.after, start, (s) => {
        if (c.subscribers.delete(s)) state.subscribers--;
        forget(c);
      });
      c.subscribers.add(subscriber);
      state.subscribers++;
      if (state.closed) subscriber.end(kind.ends.shuttingDown(null));
      return subscriber;
    },

    position: async (id) => reader.current(id),
  };

  return {
    events,
    publisher,
    /** A pub/sub message, if it is one of this kind's; false when it is not. */
    receive(name: string, message: string): boolean {
      if (!name.startsWith(live)) return false;
      const c = channels.get(name.slice(live.length));
      if (c) receiveLive(kind, c, message, instance, reader);
      return true;
    },
    catchUp() {
      for (const c of channels.values()) c.queue = c.queue.then(() => reader.catchUp(c)).catch(() => {});
    },
    keepAlive() {
      for (const c of channels.values())
        if (c.subscribers.size > 0) void commands.pexpire(seqKey(kind.space, c.id), config.idleTtlMs).catch(() => {});
        else forget(c);
    },
    endAll() {
      for (const c of channels.values()) for (const s of c.subscribers) s.end(kind.ends.shuttingDown(null));
    },
  };
}

/** A stream entry as an event: its id is its seq, and a field `p` names the seq it follows across a skip. */
function decode<E extends Numbered>(kind: ChannelKind<never, E>, channelId: string, [id, fields]: Entry): E {
  const body = JSON.parse(fields[1]!);
  const event = kind.stamp(channelId, body as never, Number(id.slice(0, id.indexOf('-'))), body.at);
  if (fields[2] === 'p') event.prev = Number(fields[3]);
  return event;
}

/** Reads channels' streams; where this instance numbers a channel itself, Redis may not have heard of the newest yet. */
function streamReader<P extends { type: string }, E extends Numbered>(
  kind: ChannelKind<P, E>,
  commands: Redis & Scripts,
  publisher: Publisher<P, E>,
  idleTtlMs: number,
): Reader<E> {
  return {
    async range(id, fromSeq, count) {
      const entries = (await commands.xrange(streamKey(kind.space, id), `${fromSeq}`, '+', 'COUNT', count)) as Entry[];
      return entries.map((e) => decode(kind, id, e));
    },
    current: (id) => publisher.position(id) ?? commands.parleyCurrent(seqKey(kind.space, id), streamKey(kind.space, id), idleTtlMs),
    async catchUp(c, untilSeq) {
      const last = c.window.last;
      if (last === null) return;
      const entries = (await commands.xrange(
        streamKey(kind.space, c.id),
        `${last + 1}`,
        untilSeq === undefined ? '+' : `${untilSeq - 1}`,
      )) as Entry[];
      for (const e of entries) c.append(decode(kind, c.id, e));
    },
  };
}

/**
 * Events another instance published for a channel watched here, in order behind what the channel
 * is handling already: a gap before them (pub/sub dropped a message) is filled from the stream first.
 */
function receiveLive<E extends Numbered>(kind: ChannelKind<never, E>, c: Channel<E>, message: string, instance: string, reader: Reader<E>) {
  // One pub/sub message (see PUBLISH in redis-scripts.ts): a line with the first seq, the seq it
  // follows across a skip (`-` for none) and the instance that numbered them itself, then one
  // event per line.
  const [head, ...lines] = message.split('\n');
  const [first, prev, numberedBy] = head!.split(' ');
  // Events this instance numbered itself were shown here as they were published.
  if (numberedBy === instance) return;
  const events = lines.map((json, i) => {
    const body = JSON.parse(json);
    return kind.stamp(c.id, body as never, Number(first) + i, body.at);
  });
  if (prev !== '-') events[0]!.prev = Number(prev);
  c.queue = c.queue
    .then(async () => {
      await c.ready;
      const last = c.window.last;
      if (last !== null && events[0]!.seq > last + 1 && events[0]!.prev !== last) await reader.catchUp(c, events[0]!.seq);
      for (const event of events) c.append(event);
    })
    .catch(() => {
      for (const event of events) c.append(event);
    });
}
