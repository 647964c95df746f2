import type { Redis } from 'ioredis';
import type { EventsConfig } from '../config.ts';
import type { SessionEvent, SessionEventPayload } from '../domain/sessions/events.ts';

export const seqKey = (sessionId: string) => `parley:seq:{${sessionId}}`;
export const streamKey = (sessionId: string) => `parley:events:{${sessionId}}`;
const bytesKey = (sessionId: string) => `parley:event-bytes:{${sessionId}}`;
const ownerKey = (sessionId: string) => `parley:seq-owner:{${sessionId}}`;
const wantedKey = (sessionId: string) => `parley:seq-wanted:{${sessionId}}`;
export const liveChannel = (sessionId: string) => `parley:live:${sessionId}`;

/**
 * Stores the events one instance published for a session (ARGV[10..], in order) in the session's
 * stream, whose entry id is the seq itself, so "events after n" is a range read; then sends them
 * to the watching instances as one pub/sub message: a line with the first seq, `prev` (below) and
 * the instance that numbered them itself (`-` for none), then one event per line (JSON has no raw
 * newline). Returns {first seq, lease, prev}.
 *
 * Who numbers: Redis (modes `n`, `l`, `j`), or, while it holds the session's lease, the instance
 * that writes a reply there, which numbers its own events and shows them to its own watchers at
 * once; Redis then only checks that they follow on (`c`, confirm), else answers -2 and stores
 * nothing. While another instance holds a live lease, numbering here is refused (-1) and a wish
 * is left (KEYS[5], naming who waits) that makes the holder hand the lease back at its next
 * confirmation and keeps it from being granted again until the one who waits got through. A lease
 * that ran out without being handed back may have shown numbers it never stored, so the next
 * events skip past them to the clock in microseconds (`j` asks the same: the caller lost one).
 * The first event after such a skip names the seq it follows (`prev`: a field `p` in the stream),
 * so watchers carry on across the hole instead of taking it
 * for events they missed, while a client holding a number that was never stored cannot resume.
 * The lease answer is 1 (granted or kept), 2 (kept, but another instance waits) or 0.
 *
 * A session's first seq comes from the clock in microseconds too (never below what the stream
 * holds): a session forgotten and started again never reuses a number a client may still hold.
 * `%d` because Lua prints large numbers as floats.
 */
const PUBLISH = `
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local mode, me, leaseMs = ARGV[7], ARGV[6], tonumber(ARGV[9])
local owner = redis.call('HMGET', KEYS[4], 'id', 'until')
local n = #ARGV - 9
local seq
local lease = 0
local prev = -1
if mode == 'c' then
  local current = tonumber(redis.call('GET', KEYS[1]) or '-1')
  if owner[1] ~= me or current + 1 ~= tonumber(ARGV[8]) then return {-2, 0, -1} end
  seq = current + 1
  redis.call('SET', KEYS[1], string.format('%d', seq + n - 1))
  redis.call('HSET', KEYS[4], 'until', string.format('%d', nowMs + leaseMs))
  lease = redis.call('EXISTS', KEYS[5]) == 1 and 2 or 1
else
  local skip = mode == 'j'
  if owner[1] and owner[1] ~= me then
    if tonumber(owner[2]) > nowMs then
      redis.call('SET', KEYS[5], me, 'PX', leaseMs)
      return {-1, 0, -1}
    end
    skip = true
  end
  local held = -1
  local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
  if last then held = tonumber(string.match(last[1], '^(%d+)')) end
  local current = redis.call('GET', KEYS[1])
  if current and not skip then
    seq = tonumber(current) + 1
  else
    seq = skip and (tonumber(time[1]) * 1000000 + tonumber(time[2])) or tonumber(ARGV[1])
    if current and tonumber(current) >= seq then seq = tonumber(current) + 1 end
    if current and skip then prev = tonumber(current) end
  end
  if held >= seq then seq = held + 1 end
  redis.call('SET', KEYS[1], string.format('%d', seq + n - 1))
  local wanted = redis.call('GET', KEYS[5])
  if wanted == me then
    redis.call('DEL', KEYS[5])
    wanted = false
  end
  if mode == 'l' and not wanted then
    redis.call('HSET', KEYS[4], 'id', me, 'until', string.format('%d', nowMs + leaseMs))
    lease = 1
  elseif owner[1] then
    redis.call('DEL', KEYS[4])
  end
end
local message = { string.format('%d', seq) .. ' ' .. (prev >= 0 and string.format('%d', prev) or '-') .. ' ' .. (mode == 'c' and me or '-') }
local bytes = 0
for i = 1, n do
  local id = string.format('%d', seq + i - 1) .. '-0'
  if i == 1 and prev >= 0 then
    redis.call('XADD', KEYS[2], id, 'e', ARGV[9 + i], 'p', string.format('%d', prev))
  else
    redis.call('XADD', KEYS[2], id, 'e', ARGV[9 + i])
  end
  message[i + 1] = ARGV[9 + i]
  bytes = redis.call('INCRBY', KEYS[3], #ARGV[9 + i])
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
if lease > 0 then redis.call('PEXPIRE', KEYS[4], ARGV[3]) end
redis.call('PUBLISH', ARGV[4], table.concat(message, '\\n'))
return {seq, lease, prev}
`;

/** Hands a lease back: Redis numbers the session's events again. */
const RELEASE = `
if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`;

/** Events a reply streams many of: publishing one asks for the session's lease. */
const streamed = (payload: SessionEventPayload) => payload.type === 'assistant_token' || payload.type === 'assistant_thinking';

type Mode = 'n' | 'l' | 'c' | 'j';

interface Batch {
  events: SessionEvent[];
  json: string[];
  settle: { resolve(event: SessionEvent): void; reject(e: unknown): void }[];
  /** Numbered here under the lease: shown to watchers here already, Redis only stores them. */
  numbered: boolean;
}

/** How this instance is publishing to one session. */
interface Writes {
  /** Events published and not yet sent, in order. */
  due: Batch | null;
  /** A call for this session is on its way: the next waits for its answer, so order holds. */
  sending: boolean;
  /** While held, the next seq this instance gives; Redis only confirms. */
  lease: { next: number } | null;
  /** Another instance waits: the lease goes back once nothing is left to confirm. */
  yielding: boolean;
  /** A lease here failed to store what it showed: the next events skip past those numbers. */
  skip: boolean;
  /** Refused while another instance holds the lease: tried again after this many ms. */
  backoff: number;
  /** Settles when the last event published here is stored (or refused). */
  stored: Promise<unknown>;
  lastPublishAt: number;
}

export interface PublisherOptions {
  /** A lease not confirmed for this long may be taken over (its holder is taken for gone). */
  leaseMs?: number;
  /** A lease nothing was published under for this long is handed back. */
  leaseIdleMs?: number;
}

/**
 * Publishes session events through Redis. What one instance publishes for a session in a tick
 * goes in one script call, every session's in one pipeline; a session has one call on its way
 * at a time, so its events keep the order they were published in.
 *
 * A reply streaming tokens would otherwise wait a round trip to Redis (and for Redis to get a
 * core) before its own watchers see each token. So the instance writing a reply takes the
 * session's lease: it numbers the session's events itself and hands them to `showHere` at once,
 * as the in-process bus does, while Redis stores them and tells the other instances. A publish
 * still settles only once Redis has stored the event, so a seq a caller is given can be resumed
 * from anywhere.
 */
export function createPublisher(
  commands: Redis,
  config: EventsConfig,
  instance: string,
  /** Events this instance numbered, for its own watchers; `lost` when Redis refused what they were shown. */
  here: { show(event: SessionEvent): void; lost(sessionId: string): void },
  options: PublisherOptions = {},
) {
  const leaseMs = options.leaseMs ?? 2_000;
  const leaseIdleMs = options.leaseIdleMs ?? 1_000;
  commands.defineCommand('parleyPublish', { numberOfKeys: 5, lua: PUBLISH });
  commands.defineCommand('parleyRelease', { numberOfKeys: 1, lua: RELEASE });
  type Scripts = {
    parleyPublish(...args: (string | number)[]): Promise<[number, number, number]>;
    parleyRelease(owner: string, instance: string): Promise<number>;
    exec(): Promise<[Error | null, unknown][] | null>;
  };
  const nowMicros = () => String(Date.now() * 1000);

  const sessions = new Map<string, Writes>();
  const writes = (sessionId: string) => {
    let w = sessions.get(sessionId);
    if (!w)
      sessions.set(
        sessionId,
        (w = {
          due: null,
          sending: false,
          lease: null,
          yielding: false,
          skip: false,
          backoff: 0,
          stored: Promise.resolve(),
          lastPublishAt: 0,
        }),
      );
    return w;
  };
  const ready = new Set<string>();
  let flushing: NodeJS.Immediate | null = null;
  let closed = false;
  const schedule = (sessionId: string) => {
    ready.add(sessionId);
    if (!flushing) flushing = setImmediate(flush);
  };

  function settled(sessionId: string, w: Writes) {
    w.sending = false;
    if (w.due) schedule(sessionId);
    else if (w.lease && w.yielding) release(sessionId, w);
    else if (!w.lease && !w.skip && w.backoff === 0) sessions.delete(sessionId);
  }

  function release(sessionId: string, w: Writes) {
    w.lease = null;
    w.yielding = false;
    w.sending = true;
    (commands as unknown as Scripts)
      .parleyRelease(ownerKey(sessionId), instance)
      .catch(() => {})
      .finally(() => settled(sessionId, w));
  }

  function answered(sessionId: string, w: Writes, batch: Batch, mode: Mode, [error, result]: [Error | null, unknown]) {
    const [first, lease, prev] = error ? [Number.NaN, 0, -1] : (result as [number, number, number]);
    if (first === -1) {
      // Another instance numbers this session for now: try again, with what came since behind.
      if (w.due) {
        batch.events.push(...w.due.events);
        batch.json.push(...w.due.json);
        batch.settle.push(...w.due.settle);
      }
      w.due = batch;
      w.backoff = Math.min(Math.max(w.backoff * 2, 2), 100);
      setTimeout(() => {
        w.backoff = 0;
        w.sending = false;
        schedule(sessionId);
      }, w.backoff).unref();
      return;
    }
    w.backoff = 0;
    if (error || first === -2) {
      const why = error ?? new Error('The session was numbered elsewhere while this instance held it');
      batch.settle.forEach((s) => s.reject(why));
      if (mode === 'c') {
        // Watchers here were shown events Redis may not hold: they read the session again, and
        // whatever follows is numbered past anything they saw.
        w.lease = null;
        w.yielding = false;
        w.skip = true;
        if (w.due?.numbered) {
          w.due.settle.forEach((s) => s.reject(why));
          w.due = null;
        }
        here.lost(sessionId);
      }
      return settled(sessionId, w);
    }
    if (mode === 'j') w.skip = false;
    if (mode === 'c') {
      if (lease === 2) w.yielding = true;
    } else if (lease === 1 && !w.due && !closed) {
      // Granted, with nothing published since: from here this instance numbers the session.
      w.lease = { next: first + batch.events.length };
      batch.events.forEach((e, i) => {
        e.seq = first + i;
        if (i === 0 && prev >= 0) e.prev = prev;
        here.show(e);
      });
    }
    batch.events.forEach((e, i) => {
      e.seq = first + i;
      batch.settle[i]!.resolve(e);
    });
    if (prev >= 0) batch.events[0]!.prev = prev;
    settled(sessionId, w);
  }

  function flush() {
    flushing = null;
    const pipeline = commands.pipeline() as unknown as Scripts;
    const sent: { sessionId: string; w: Writes; batch: Batch; mode: Mode }[] = [];
    for (const sessionId of ready) {
      const w = sessions.get(sessionId);
      if (!w?.due || w.sending || w.backoff > 0) continue;
      const batch = w.due;
      w.due = null;
      w.sending = true;
      const mode: Mode = batch.numbered ? 'c' : w.skip ? 'j' : w.yielding || closed ? 'n' : batch.events.some(streamed) ? 'l' : 'n';
      pipeline.parleyPublish(
        seqKey(sessionId),
        streamKey(sessionId),
        bytesKey(sessionId),
        ownerKey(sessionId),
        wantedKey(sessionId),
        nowMicros(),
        config.replayLimit,
        config.idleTtlMs,
        liveChannel(sessionId),
        config.replayBytes,
        instance,
        mode,
        batch.numbered ? batch.events[0]!.seq : 0,
        leaseMs,
        ...batch.json,
      );
      sent.push({ sessionId, w, batch, mode });
    }
    ready.clear();
    if (sent.length === 0) return;
    pipeline.exec().then(
      (results) =>
        sent.forEach((s, i) =>
          answered(s.sessionId, s.w, s.batch, s.mode, results?.[i] ?? [new Error('Redis did not answer the publish'), null]),
        ),
      (error: unknown) => sent.forEach((s) => answered(s.sessionId, s.w, s.batch, s.mode, [error as Error, null])),
    );
  }

  // A lease nothing was published under for a while goes back, so that other instances number
  // the session again without waiting for it to run out.
  const idle = setInterval(
    () => {
      const cutoff = Date.now() - leaseIdleMs;
      for (const [sessionId, w] of sessions) if (w.lease && !w.sending && !w.due && w.lastPublishAt < cutoff) release(sessionId, w);
    },
    Math.max(50, leaseIdleMs / 2),
  );
  idle.unref();

  return {
    publish(sessionId: string, payload: SessionEventPayload): Promise<SessionEvent> {
      const at = new Date().toISOString();
      const w = writes(sessionId);
      w.lastPublishAt = Date.now();
      const event = { ...payload, at, seq: 0, sessionId } as SessionEvent;
      const numbered = w.lease !== null;
      if (numbered) {
        event.seq = w.lease!.next++;
        here.show(event);
      }
      const published = new Promise<SessionEvent>((resolve, reject) => {
        w.due ??= { events: [], json: [], settle: [], numbered };
        w.due.events.push(event);
        w.due.json.push(JSON.stringify({ ...payload, at }));
        w.due.settle.push({ resolve: () => resolve(event), reject });
        schedule(sessionId);
      });
      w.stored = published.catch(() => {});
      return published;
    },

    /** Settles once what this instance has published to the session so far is stored (or refused). */
    stored: (sessionId: string) => sessions.get(sessionId)?.stored ?? Promise.resolve(),

    /** The seq this instance last gave the session under its lease; null when Redis numbers it. */
    position(sessionId: string): number | null {
      const lease = sessions.get(sessionId)?.lease;
      return lease ? lease.next - 1 : null;
    },

    holds: (sessionId: string) => sessions.get(sessionId)?.lease != null,

    /** Sends what is due and hands every lease back (after what is on its way: one connection keeps order). */
    close() {
      closed = true;
      clearInterval(idle);
      if (flushing) {
        clearImmediate(flushing);
        for (const [sessionId, w] of sessions) if (w.due) ready.add(sessionId);
        flush();
      }
      for (const [sessionId, w] of sessions)
        if (w.lease) void (commands as unknown as Scripts).parleyRelease(ownerKey(sessionId), instance).catch(() => {});
    },
  };
}
