import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { EventsConfig } from '../config.ts';
import type { SessionEvent, SessionEventPayload } from '../domain/sessions/events.ts';
import type { WarnLog } from '../limits/throttled-log.ts';
import { connectRedis } from '../redis/client.ts';
import { type EventSource, ends, Listeners, ReplayWindow, Subscriber } from './subscription.ts';
import type { CancelRequest, EventBus, SubscribeOptions } from '../domain/sessions/bus.ts';

const seqKey = (sessionId: string) => `parley:seq:{${sessionId}}`;
const streamKey = (sessionId: string) => `parley:events:{${sessionId}}`;
const bytesKey = (sessionId: string) => `parley:event-bytes:{${sessionId}}`;
const liveChannel = (sessionId: string) => `parley:live:${sessionId}`;
const CONTROL = 'parley:control';
const LIVE_PREFIX = 'parley:live:';

/**
 * Numbers the events one instance published for a session in one tick (ARGV[5..], in order) and
 * appends each to the session's stream, whose entry id is the seq itself, so "events after n" is
 * a range read; then sends them to the watching instances as one pub/sub message: the first seq,
 * then one event per line (JSON has no raw newline). A session's first seq comes from the clock
 * in microseconds (never below what the stream already holds): a session forgotten and started
 * again never reuses a number a client may still hold. `%d` because Lua prints large numbers as
 * floats. Returns the first event's seq.
 */
const PUBLISH = `
local n = #ARGV - 5
local seq
if redis.call('EXISTS', KEYS[1]) == 1 then
  seq = redis.call('INCRBY', KEYS[1], n) - n + 1
else
  seq = tonumber(ARGV[1])
  local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
  if last then
    local held = tonumber(string.match(last[1], '^(%d+)'))
    if held >= seq then seq = held + 1 end
  end
  redis.call('SET', KEYS[1], string.format('%d', seq + n - 1))
end
local message = { string.format('%d', seq) }
local bytes = 0
for i = 1, n do
  redis.call('XADD', KEYS[2], string.format('%d', seq + i - 1) .. '-0', 'e', ARGV[5 + i])
  message[i + 1] = ARGV[5 + i]
  bytes = redis.call('INCRBY', KEYS[3], #ARGV[5 + i])
end
-- The log keeps at most ARGV[2] events and about ARGV[5] bytes of them (KEYS[3] counts what it
-- holds): the oldest go first, never the last event just added.
local newest = string.format('%d', seq + n - 1) .. '-0'
while redis.call('XLEN', KEYS[2]) > tonumber(ARGV[2]) or bytes > tonumber(ARGV[5]) do
  local oldest = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)[1]
  if not oldest or oldest[1] == newest then break end
  redis.call('XDEL', KEYS[2], oldest[1])
  bytes = redis.call('DECRBY', KEYS[3], #oldest[2][2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
redis.call('PUBLISH', ARGV[4], table.concat(message, '\\n'))
return seq
`;

/** The session's current seq, made now (as PUBLISH would) if the session has none yet. */
const CURRENT = `
local seq = redis.call('GET', KEYS[1])
if not seq then
  seq = tonumber(ARGV[1])
  local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
  if last then
    local held = tonumber(string.match(last[1], '^(%d+)'))
    if held >= seq then seq = held end
  end
  redis.call('SET', KEYS[1], string.format('%d', seq))
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return tonumber(seq)
`;

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
  readonly ready: Promise<void>;

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
}

interface Reader {
  range(sessionId: string, fromSeq: number, count: number): Promise<SessionEvent[]>;
  current(sessionId: string): Promise<number>;
}

/**
 * Live events shared by every instance through Redis. Each event goes into its session's
 * Redis Stream (the replay log, bounded by EVENT_REPLAY_LIMIT and forgotten after
 * EVENT_IDLE_TTL_MS of quiet) and out on a pub/sub channel to the instances whose clients watch
 * that session. Resuming with `after` reads the stream, so it works on any instance and across
 * restarts of parley. Pub/sub can drop messages while a connection is re-established: seqs are
 * consecutive, so a gap is seen and filled from the stream.
 */
export function createRedisBus(url: string, config: EventsConfig, keyPrefix = '', log?: WarnLog): EventBus {
  const instance = randomUUID();
  const commands = connectRedis(url, 'events', keyPrefix, log);
  const listener = connectRedis(url, 'events-listener', keyPrefix, log);
  commands.defineCommand('parleyPublish', { numberOfKeys: 3, lua: PUBLISH });
  commands.defineCommand('parleyCurrent', { numberOfKeys: 2, lua: CURRENT });
  const run = commands as Redis & {
    parleyPublish(
      seq: string,
      stream: string,
      bytes: string,
      now: string,
      maxlen: number,
      ttl: number,
      channel: string,
      maxBytes: number,
      ...json: string[]
    ): Promise<number>;
    parleyCurrent(seq: string, stream: string, now: string, ttl: number): Promise<number>;
  };
  const nowMicros = () => String(Date.now() * 1000);

  const channels = new Map<string, Channel>();
  const revokedKeys = new Listeners<string>();
  const cancels = new Listeners<CancelRequest>();
  let subscriberCount = 0;
  let closed = false;

  const decode = (sessionId: string, [id, fields]: Entry): SessionEvent => ({
    ...JSON.parse(fields[1]!),
    seq: Number(id.slice(0, id.indexOf('-'))),
    sessionId,
  });

  const reader: Reader = {
    async range(sessionId, fromSeq, count) {
      const entries = (await commands.xrange(streamKey(sessionId), `${fromSeq}`, '+', 'COUNT', count)) as Entry[];
      return entries.map((e) => decode(sessionId, e));
    },
    current: (sessionId) => run.parleyCurrent(seqKey(sessionId), streamKey(sessionId), nowMicros(), config.idleTtlMs),
  };

  /** Events from `fromSeq` up to (not including) `untilSeq`, in order, to close a gap. */
  async function catchUp(c: Channel, untilSeq?: number) {
    const last = c.window.last;
    if (last === null) return;
    const entries = (await commands.xrange(
      streamKey(c.sessionId),
      `${last + 1}`,
      untilSeq === undefined ? '+' : `${untilSeq - 1}`,
    )) as Entry[];
    for (const e of entries) c.append(decode(c.sessionId, e));
  }

  function channel(sessionId: string) {
    let c = channels.get(sessionId);
    if (!c) {
      c = new Channel(sessionId, config.replayLimit, config.replayBytes, reader, async (ch) => {
        await listener.subscribe(liveChannel(sessionId));
        // Whatever was published before the subscription took effect is read from the stream.
        ch.window.last = await reader.current(sessionId);
      });
      channels.set(sessionId, c);
    }
    return c;
  }

  function forget(c: Channel) {
    if (c.subscribers.size > 0 || channels.get(c.sessionId) !== c) return;
    channels.delete(c.sessionId);
    void listener.unsubscribe(liveChannel(c.sessionId)).catch(() => {});
  }

  listener.on('message', (name: string, message: string) => {
    if (name === CONTROL) {
      const signal = JSON.parse(message) as { from: string } & (
        | { type: 'revoke_key'; keyId: string }
        | ({ type: 'cancel' } & CancelRequest)
      );
      if (signal.from === instance) return;
      if (signal.type === 'revoke_key') revokedKeys.emit(signal.keyId);
      else cancels.emit({ sessionId: signal.sessionId, promptId: signal.promptId, reason: signal.reason });
      return;
    }
    if (!name.startsWith(LIVE_PREFIX)) return;
    const c = channels.get(name.slice(LIVE_PREFIX.length));
    if (!c) return;
    const [first, ...lines] = message.split('\n');
    const events = lines.map((json, i) => ({ ...JSON.parse(json), seq: Number(first) + i, sessionId: c.sessionId }) as SessionEvent);
    c.queue = c.queue
      .then(async () => {
        await c.ready;
        const last = c.window.last;
        if (last !== null && events[0]!.seq > last + 1) await catchUp(c, events[0]!.seq);
        for (const event of events) c.append(event);
      })
      .catch(() => {
        for (const event of events) c.append(event);
      });
  });
  // After a reconnect (ioredis subscribes again by itself) events may have gone by unseen.
  listener.on('ready', () => {
    for (const c of channels.values()) c.queue = c.queue.then(() => catchUp(c)).catch(() => {});
  });
  void listener.subscribe(CONTROL);

  // Sessions someone here watches keep their seq alive, so a quiet hour does not restart it.
  const keepAlive = setInterval(
    () => {
      for (const c of channels.values())
        if (c.subscribers.size > 0) void commands.pexpire(seqKey(c.sessionId), config.idleTtlMs).catch(() => {});
    },
    Math.max(1_000, Math.floor(config.idleTtlMs / 3)),
  );
  keepAlive.unref();

  /**
   * What this instance published in the current tick, by session, sent at the end of the tick:
   * one script call per session (a thousand replies streaming make a thousand events a tick)
   * and all of them in one pipeline, one round trip. Calls on one connection run in order, so a
   * session's events keep the order they were published in, across ticks too.
   */
  let due = new Map<string, { events: string[]; settle: { resolve(seq: number): void; reject(e: unknown): void }[] }>();
  let flushing: NodeJS.Immediate | null = null;
  function flush() {
    const batches = due;
    due = new Map();
    flushing = null;
    const pipeline = commands.pipeline() as unknown as typeof run & { exec(): Promise<[Error | null, unknown][] | null> };
    for (const [sessionId, b] of batches)
      pipeline.parleyPublish(
        seqKey(sessionId),
        streamKey(sessionId),
        bytesKey(sessionId),
        nowMicros(),
        config.replayLimit,
        config.idleTtlMs,
        liveChannel(sessionId),
        config.replayBytes,
        ...b.events,
      );
    const all = [...batches.values()];
    pipeline.exec().then(
      (results) =>
        all.forEach((b, i) => {
          const [error, first] = results?.[i] ?? [new Error('Redis did not answer the publish'), null];
          if (error) b.settle.forEach((s) => s.reject(error));
          else b.settle.forEach((s, k) => s.resolve(Number(first) + k));
        }),
      (error: unknown) => all.forEach((b) => b.settle.forEach((s) => s.reject(error))),
    );
  }

  const control = (signal: object) => commands.publish(CONTROL, JSON.stringify({ ...signal, from: instance })).then(() => undefined);

  return {
    publish(sessionId: string, payload: SessionEventPayload) {
      const at = new Date().toISOString();
      const json = JSON.stringify({ ...payload, at });
      return new Promise<SessionEvent>((resolve, reject) => {
        let batch = due.get(sessionId);
        if (!batch) due.set(sessionId, (batch = { events: [], settle: [] }));
        batch.events.push(json);
        batch.settle.push({ resolve: (seq) => resolve({ ...payload, at, seq, sessionId } as SessionEvent), reject });
        if (!flushing) flushing = setImmediate(flush);
      });
    },

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

    position: (sessionId) => reader.current(sessionId),

    async revokeKey(keyId: string) {
      revokedKeys.emit(keyId);
      await control({ type: 'revoke_key', keyId });
    },

    onKeyRevoked: (l) => revokedKeys.add(l),

    async cancelReplies(request: CancelRequest) {
      cancels.emit(request);
      await control({ type: 'cancel', ...request });
    },

    onCancelReplies: (l) => cancels.add(l),

    async close() {
      if (closed) return;
      closed = true;
      clearInterval(keepAlive);
      for (const c of channels.values()) for (const s of c.subscribers) s.end(ends.shuttingDown(null));
      // Subscribers read their final item from memory; the connections can go now.
      listener.disconnect();
      await commands.quit().catch(() => commands.disconnect());
    },

    async describe() {
      const where = new URL(url);
      const events = `Redis at ${where.hostname}:${where.port || 6379} (shared by every instance)`;
      const reachable = await Promise.race([
        commands.ping().then(() => true),
        new Promise<boolean>((r) => setTimeout(r, 1_000, false)),
      ]).catch(() => false);
      return { events, reachable };
    },

    subscriberCount: () => subscriberCount,
  };
}
