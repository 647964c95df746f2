import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { EventsConfig } from '../config.ts';
import type { SessionEvent } from '../domain/core/events.ts';
import type { WarnLog } from '../limits/throttled-log.ts';
import { connectRedis } from '../redis/client.ts';
import { Publisher, type PublisherOptions } from './redis-publisher.ts';
import { defineScripts, liveChannel, type Scripts, seqKey, streamKey } from './redis-scripts.ts';
import { type EventSource, ends, Listeners, ReplayWindow, Subscriber } from './subscription.ts';
import type { CancelRequest, EventBus, SubscribeOptions } from '../domain/core/bus.ts';
import { within } from '../domain/core/within.ts';

const CONTROL = 'parley:control';
const LIVE_PREFIX = 'parley:live:';

type Entry = [id: string, fields: string[]];

/**
 * A session as this instance sees it: the events that arrived live since someone here started
 * watching (the window), in front of the Redis stream that holds the rest.
 */
class Channel implements EventSource {
  readonly window: ReplayWindow;
  readonly subscribers = new Set<Subscriber>();
  /** Incoming events are handled one after another: a gap is filled before what follows it. */
  queue: Promise<void> = Promise.resolve();
  ready: Promise<void>;

  constructor(
    readonly sessionId: string,
    retain: number,
    retainBytes: number,
    private readonly reader: Reader,
    init: (c: Channel) => Promise<void>,
  ) {
    this.window = new ReplayWindow(retain, null, retainBytes);
    this.ready = init(this);
  }

  current() {
    return this.reader.current(this.sessionId);
  }

  range(fromSeq: number, count: number) {
    return this.reader.range(this.sessionId, fromSeq, count);
  }

  append(event: SessionEvent) {
    if (this.window.push(event)) for (const s of this.subscribers) s.wake();
  }

  /**
   * Events this instance showed here were refused by Redis: their watchers are told to read the
   * session again, and the window starts again from where Redis has the session.
   */
  renumbered() {
    this.window.clear();
    for (const s of this.subscribers) s.end(ends.unstored(null));
    this.ready = Promise.resolve(this.reader.current(this.sessionId)).then(
      (at) => this.window.advance(at),
      () => {},
    );
  }
}

/** Where a channel reads what its window does not hold. */
interface Reader {
  range(sessionId: string, fromSeq: number, count: number): Promise<SessionEvent[]>;
  current(sessionId: string): number | Promise<number>;
}

/** A stream entry as an event: its id is its seq, and a field `p` names the seq it follows across a skip. */
const decode = (sessionId: string, [id, fields]: Entry): SessionEvent => {
  const event: SessionEvent = { ...JSON.parse(fields[1]!), seq: Number(id.slice(0, id.indexOf('-'))), sessionId };
  if (fields[2] === 'p') event.prev = Number(fields[3]);
  return event;
};

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

/**
 * Live events shared by every instance through Redis. Each event goes into its session's
 * Redis Stream (the replay log, bounded by EVENT_REPLAY_LIMIT and forgotten after
 * EVENT_IDLE_TTL_MS of quiet) and out on a pub/sub channel to the instances whose clients watch
 * that session. Resuming with `after` reads the stream, so it works on any instance and across
 * restarts of parley. Pub/sub can drop messages while a connection is re-established: seqs are
 * consecutive, so a gap is seen and filled from the stream.
 */
export function createRedisBus(url: string, config: EventsConfig, keyPrefix = '', log?: WarnLog, leases: PublisherOptions = {}): EventBus {
  const instance = randomUUID();
  const commands = defineScripts(connectRedis(url, 'events', keyPrefix, log));
  const listener = connectRedis(url, 'events-listener', keyPrefix, log);
  const channels = new Map<string, Channel>();
  const publisher = new Publisher(
    commands,
    config,
    instance,
    {
      show: (event) => channels.get(event.sessionId)?.append(event),
      lost: (sessionId) => channels.get(sessionId)?.renumbered(),
      released(sessionId) {
        const c = channels.get(sessionId);
        if (c) forget(c);
      },
    },
    leases,
  );
  const reader = streamReader(commands, publisher, config.idleTtlMs);
  const control = new ControlSignals(commands, instance);
  let subscriberCount = 0;
  let closed = false;

  function channel(sessionId: string) {
    let c = channels.get(sessionId);
    if (!c) {
      c = new Channel(sessionId, config.replayLimit, config.replayBytes, reader, async (ch) => {
        await listener.subscribe(liveChannel(sessionId));
        // Whatever was published before the subscription took effect is read from the stream
        // (once what this instance numbered itself is stored there); what this instance numbers
        // from now on is in the window already.
        await publisher.stored(sessionId);
        ch.window.advance(await reader.current(sessionId));
      });
      channels.set(sessionId, c);
    }
    return c;
  }

  /** A session this instance numbers keeps its window: a watcher resuming here finds what Redis may not hold yet. */
  function forget(c: Channel) {
    if (c.subscribers.size > 0 || channels.get(c.sessionId) !== c || publisher.holds(c.sessionId)) return;
    channels.delete(c.sessionId);
    void listener.unsubscribe(liveChannel(c.sessionId)).catch(() => {});
  }

  listener.on('message', (name: string, message: string) => {
    if (name === CONTROL) return control.receive(message);
    const c = name.startsWith(LIVE_PREFIX) ? channels.get(name.slice(LIVE_PREFIX.length)) : undefined;
    if (c) receiveLive(c, message, instance, reader);
  });
  // After a reconnect (ioredis subscribes again by itself) events may have gone by unseen.
  listener.on('ready', () => {
    for (const c of channels.values()) c.queue = c.queue.then(() => reader.catchUp(c)).catch(() => {});
  });
  void listener.subscribe(CONTROL);

  // Sessions someone here watches keep their seq alive, so a quiet hour does not restart it.
  const keepAlive = setInterval(
    () => {
      for (const c of channels.values())
        if (c.subscribers.size > 0) void commands.pexpire(seqKey(c.sessionId), config.idleTtlMs).catch(() => {});
        else forget(c);
    },
    Math.max(1_000, Math.floor(config.idleTtlMs / 3)),
  );
  keepAlive.unref();

  return {
    publish: (sessionId, payload) => publisher.publish(sessionId, payload),

    subscribe(sessionId: string, options: SubscribeOptions = {}) {
      const c = channel(sessionId);
      // Asked now, on the connection later publishes go through: nothing published after this
      // call is missed, however long the pub/sub subscription takes.
      const start = options.after === undefined ? reader.current(sessionId) : undefined;
      const subscriber = new Subscriber(c, options.after, start, (s) => {
        if (c.subscribers.delete(s)) subscriberCount--;
        forget(c);
      });
      c.subscribers.add(subscriber);
      subscriberCount++;
      if (closed) subscriber.end(ends.shuttingDown(null));
      return subscriber;
    },

    position: async (sessionId) => reader.current(sessionId),

    revokeKey: (keyId: string) => control.revokeKey(keyId),

    onKeyRevoked: (l) => control.revokedKeys.add(l),

    cancelReplies: (request: CancelRequest) => control.cancelReplies(request),

    onCancelReplies: (l) => control.cancels.add(l),

    async close() {
      if (closed) return;
      closed = true;
      clearInterval(keepAlive);
      for (const c of channels.values()) for (const s of c.subscribers) s.end(ends.shuttingDown(null));
      // Subscribers read their final item from memory; the connections can go once what was
      // published is stored.
      listener.disconnect();
      await publisher.close();
      await commands.quit().catch(() => commands.disconnect());
    },

    async describe() {
      const where = new URL(url);
      const events = `Redis at ${where.hostname}:${where.port || 6379} (shared by every instance)`;
      const answered = commands.ping().then(() => true);
      const reachable = await within(answered, 1_000, false).catch(() => false);
      return { events, reachable };
    },

    subscriberCount: () => subscriberCount,
  };
}

/** Reads sessions' streams; where this instance numbers a session itself, Redis may not have heard of the newest yet. */
function streamReader(commands: Redis & Scripts, publisher: Publisher, idleTtlMs: number) {
  return {
    async range(sessionId: string, fromSeq: number, count: number) {
      const entries = (await commands.xrange(streamKey(sessionId), `${fromSeq}`, '+', 'COUNT', count)) as Entry[];
      return entries.map((e) => decode(sessionId, e));
    },
    current: (sessionId: string) =>
      publisher.position(sessionId) ?? commands.parleyCurrent(seqKey(sessionId), streamKey(sessionId), idleTtlMs),
    /** Events from after the window's last up to (not including) `untilSeq`, in order, to close a gap. */
    async catchUp(c: Channel, untilSeq?: number) {
      const last = c.window.last;
      if (last === null) return;
      const entries = (await commands.xrange(
        streamKey(c.sessionId),
        `${last + 1}`,
        untilSeq === undefined ? '+' : `${untilSeq - 1}`,
      )) as Entry[];
      for (const e of entries) c.append(decode(c.sessionId, e));
    },
  };
}

/**
 * Events another instance published for a session watched here, in order behind what the channel
 * is handling already: a gap before them (pub/sub dropped a message) is filled from the stream first.
 */
function receiveLive(c: Channel, message: string, instance: string, reader: ReturnType<typeof streamReader>) {
  // One pub/sub message (see PUBLISH in redis-scripts.ts): a line with the first seq, the seq it
  // follows across a skip (`-` for none) and the instance that numbered them itself, then one
  // event per line.
  const [head, ...lines] = message.split('\n');
  const [first, prev, numberedBy] = head!.split(' ');
  // Events this instance numbered itself were shown here as they were published.
  if (numberedBy === instance) return;
  const events = lines.map((json, i) => ({ ...JSON.parse(json), seq: Number(first) + i, sessionId: c.sessionId }) as SessionEvent);
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
