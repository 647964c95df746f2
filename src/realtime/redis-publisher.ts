import type { Redis } from 'ioredis';
import type { EventsConfig } from '../config.ts';
import type { SessionEvent, SessionEventPayload } from '../domain/core/events.ts';

export const seqKey = (sessionId: string) => `parley:seq:{${sessionId}}`;
export const streamKey = (sessionId: string) => `parley:events:{${sessionId}}`;
const bytesKey = (sessionId: string) => `parley:event-bytes:{${sessionId}}`;
const ownerKey = (sessionId: string) => `parley:seq-owner:{${sessionId}}`;
const wantedKey = (sessionId: string) => `parley:seq-wanted:{${sessionId}}`;
export const liveChannel = (sessionId: string) => `parley:live:${sessionId}`;

/**
 * How many events a lease holder may show its watchers beyond what Redis has confirmed. A lease
 * that ends badly makes the next events skip past at least this many numbers, so none the holder
 * may have shown unstored is used again. A holder that gets this far ahead hands the lease back.
 */
const MAX_AHEAD = 100_000;

/**
 * A session's first seq, and where numbers skip to: Redis's clock in microseconds (one clock for
 * every instance), never below what the session already used.
 */
const FIRST_SEQ = `
local function firstSeq(current, held, skip)
  local time = redis.call('TIME')
  local seq = tonumber(time[1]) * 1000000 + tonumber(time[2])
  if current and tonumber(current) >= seq then seq = tonumber(current) + 1 end
  if held >= seq then seq = held + 1 end
  if skip and current and tonumber(current) + 1 + ${MAX_AHEAD} > seq then seq = tonumber(current) + 1 + ${MAX_AHEAD} end
  return seq
end
local function lastHeld(stream)
  local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
  if last then return tonumber(string.match(last[1], '^(%d+)')) end
  return -1
end
`;

/**
 * Stores the events one instance published for a session (ARGV[9..], in order) in the session's
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
 * confirmation and keeps it from being granted again until the one who waits got through.
 * A lease that ran out without being handed back may have shown numbers it never stored, so the
 * next events skip past them (`j` asks the same: the caller lost its lease). The first event
 * after such a skip names the seq it follows (`prev`: a field `p` in the stream), so watchers
 * carry on across the hole instead of taking it for events they missed, while a client holding
 * a number that was never stored cannot resume. The lease answer is 1 (granted or kept), 2 (kept,
 * but another instance waits) or 0. `%d` because Lua prints large numbers as floats.
 */
const PUBLISH = `${FIRST_SEQ}
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local maxlen, ttl, channel, maxBytes = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])
local me, mode, expected, leaseMs = ARGV[5], ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local owner = redis.call('HMGET', KEYS[4], 'id', 'until')
local n = #ARGV - 8
local current = redis.call('GET', KEYS[1])
local seq
local lease = 0
local prev = -1
if mode == 'c' then
  if owner[1] ~= me or not current or tonumber(current) + 1 ~= expected then return {-2, 0, -1} end
  seq = expected
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
  if current and not skip then
    seq = tonumber(current) + 1
  else
    seq = firstSeq(current, lastHeld(KEYS[2]), skip)
    if current and skip then prev = tonumber(current) end
  end
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
redis.call('SET', KEYS[1], string.format('%d', seq + n - 1))
local message = { string.format('%d', seq) .. ' ' .. (prev >= 0 and string.format('%d', prev) or '-') .. ' ' .. (mode == 'c' and me or '-') }
local bytes = 0
for i = 1, n do
  local id = string.format('%d', seq + i - 1) .. '-0'
  if i == 1 and prev >= 0 then
    redis.call('XADD', KEYS[2], id, 'e', ARGV[8 + i], 'p', string.format('%d', prev))
  else
    redis.call('XADD', KEYS[2], id, 'e', ARGV[8 + i])
  end
  message[i + 1] = ARGV[8 + i]
  bytes = redis.call('INCRBY', KEYS[3], #ARGV[8 + i])
end
-- The log keeps at most maxlen events and about maxBytes of them (KEYS[3] counts what it holds):
-- the oldest go first, never the last event just added.
local newest = string.format('%d', seq + n - 1) .. '-0'
while redis.call('XLEN', KEYS[2]) > maxlen or bytes > maxBytes do
  local oldest = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)[1]
  if not oldest or oldest[1] == newest then break end
  redis.call('XDEL', KEYS[2], oldest[1])
  bytes = redis.call('DECRBY', KEYS[3], #oldest[2][2])
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)
if lease > 0 then redis.call('PEXPIRE', KEYS[4], ttl) end
redis.call('PUBLISH', channel, table.concat(message, '\\n'))
return {seq, lease, prev}
`;

/** The session's current seq, made now (as PUBLISH would) if the session has none yet. */
export const CURRENT = `${FIRST_SEQ}
local seq = redis.call('GET', KEYS[1])
if not seq then
  seq = firstSeq(nil, lastHeld(KEYS[2]), false) - 1
  redis.call('SET', KEYS[1], string.format('%d', seq))
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return tonumber(seq)
`;

/** Hands a lease back: Redis numbers the session's events again. */
const RELEASE = `
if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`;

/** Events a reply streams many of: publishing one asks for the session's lease. */
const streamed = (payload: SessionEventPayload) => payload.type === 'assistant_token' || payload.type === 'assistant_thinking';

type Mode = 'n' | 'l' | 'c' | 'j';

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
interface Writes {
  /** Events published and not yet sent, in order. */
  due: Batch | null;
  /** The call for this session on its way: the next waits for its answer, so order holds. */
  sending: Batch | null;
  /** While held, the next seq this instance gives and the last one Redis confirmed. */
  lease: { next: number; confirmed: number } | null;
  /** The lease goes back once what was numbered under it is confirmed; events meanwhile wait here. */
  yielding: boolean;
  later: Batch | null;
  /** Refused while another instance holds the lease: tried again after `backoff` ms. */
  waiting: boolean;
  backoff: number;
  /** A lease here ended with events shown and not stored: the next events skip past those numbers. */
  skipSince: number | null;
  lastPublishAt: number;
}

export interface PublisherOptions {
  /** A lease not confirmed for this long may be taken over (its holder is taken for gone). */
  leaseMs?: number;
  /** A lease nothing was published under for this long is handed back. */
  leaseIdleMs?: number;
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
export function createPublisher(
  commands: Redis,
  config: EventsConfig,
  instance: string,
  /**
   * Events this instance numbered, for its own watchers; `lost` when Redis refused what they were
   * shown; `released` once the session's lease is no longer held here.
   */
  here: { show(event: SessionEvent): void; lost(sessionId: string): void; released(sessionId: string): void },
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
  const scripts = commands as unknown as Scripts;

  const sessions = new Map<string, Writes>();
  const writes = (sessionId: string) => {
    let w = sessions.get(sessionId);
    if (!w) {
      w = {
        due: null,
        sending: null,
        lease: null,
        yielding: false,
        later: null,
        waiting: false,
        backoff: 0,
        skipSince: null,
        lastPublishAt: 0,
      };
      sessions.set(sessionId, w);
    }
    return w;
  };
  const ready = new Set<string>();
  let flushing: NodeJS.Immediate | null = null;
  let closed = false;
  let confirming: NodeJS.Timeout | null = null;
  /**
   * Events numbered here are sent a few milliseconds later, many ticks' worth together: their
   * watchers here have them already, so only other instances wait, and Redis is woken far less.
   */
  const schedule = (sessionId: string) => {
    ready.add(sessionId);
    if (flushing) return;
    if (sessions.get(sessionId)?.due?.numbered) confirming ??= setTimeout(flush, CONFIRM_EVERY_MS);
    else flushing = setImmediate(flush);
  };

  /** Numbers `event` under the lease and shows it here. */
  function number(w: Writes, event: SessionEvent) {
    event.seq = w.lease!.next++;
    here.show(event);
  }

  function settled(sessionId: string, w: Writes) {
    w.sending = null;
    if (w.due) schedule(sessionId);
    else if (w.lease && w.yielding) release(sessionId, w);
    else if (!w.lease && !w.later && !w.waiting && w.skipSince === null) sessions.delete(sessionId);
  }

  /**
   * Hands the lease back; what was published meanwhile goes after, numbered by Redis. Nothing waits
   * for the answer: one connection keeps order, so whatever is sent next runs after the release.
   */
  function release(sessionId: string, w: Writes) {
    w.lease = null;
    w.yielding = false;
    w.due = w.later;
    w.later = null;
    void scripts.parleyRelease(ownerKey(sessionId), instance).catch(() => {});
    here.released(sessionId);
    settled(sessionId, w);
  }

  function refused(sessionId: string, w: Writes, batch: Batch) {
    // Another instance numbers this session for now: try again, with what came since behind.
    if (w.due) batch.take(w.due);
    w.due = batch;
    w.waiting = true;
    w.backoff = Math.min(Math.max(w.backoff * 2, 1), 10);
    setTimeout(() => {
      w.waiting = false;
      settled(sessionId, w);
    }, w.backoff).unref();
  }

  function answered(sessionId: string, w: Writes, batch: Batch, mode: Mode, [error, result]: [Error | null, unknown]) {
    const [first, lease, prev] = error ? [Number.NaN, 0, -1] : (result as [number, number, number]);
    if (first === -1) return refused(sessionId, w, batch);
    w.backoff = 0;
    if (error || first === -2) {
      const why = error ?? new Error('The session was numbered elsewhere while this instance held it');
      batch.reject(why);
      if (mode === 'c') {
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
        here.lost(sessionId);
        here.released(sessionId);
      }
      if (error && commands.status !== 'ready') {
        // Redis is out of reach: what waited behind this call fails with it now, instead of each
        // call after it waiting out a retry budget of its own (they add up to many seconds).
        w.due?.reject(error);
        w.due = null;
      }
      return settled(sessionId, w);
    }
    if (!batch.numbered) {
      batch.events.forEach((e, i) => (e.seq = first + i));
      if (prev >= 0) batch.events[0]!.prev = prev;
    }
    if (mode === 'j') w.skipSince = null;
    if (mode === 'c') {
      w.lease!.confirmed = first + batch.events.length - 1;
      if (lease === 2) w.yielding = true;
    } else if (lease === 1) {
      // Granted: from here this instance numbers the session, what was published since included.
      w.lease = { next: first + batch.events.length, confirmed: first + batch.events.length - 1 };
      for (const e of batch.events) here.show(e);
      if (w.due) {
        for (const e of w.due.events) number(w, e);
        w.due.numbered = true;
      }
    }
    batch.resolve();
    settled(sessionId, w);
  }

  function flush() {
    if (flushing) clearImmediate(flushing);
    if (confirming) clearTimeout(confirming);
    flushing = null;
    confirming = null;
    const pipeline = commands.pipeline() as unknown as Scripts;
    const sent: { sessionId: string; w: Writes; batch: Batch; mode: Mode }[] = [];
    for (const sessionId of ready) {
      const w = sessions.get(sessionId);
      if (!w?.due || w.sending || w.waiting) continue;
      const batch = w.due;
      w.due = null;
      w.sending = batch;
      const mode: Mode = batch.numbered ? 'c' : w.skipSince !== null ? 'j' : !closed && batch.events.some(streamed) ? 'l' : 'n';
      pipeline.parleyPublish(
        seqKey(sessionId),
        streamKey(sessionId),
        bytesKey(sessionId),
        ownerKey(sessionId),
        wantedKey(sessionId),
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
    const answer = (s: (typeof sent)[number], reply: [Error | null, unknown]) => {
      try {
        answered(s.sessionId, s.w, s.batch, s.mode, reply);
      } catch (error) {
        // One session's watcher throwing must not leave the others' answers unread.
        if (s.w.sending === s.batch) {
          s.batch.reject(error);
          settled(s.sessionId, s.w);
        }
      }
    };
    pipeline.exec().then(
      (results) => sent.forEach((s, i) => answer(s, results?.[i] ?? [new Error('Redis did not answer the publish'), null])),
      (error: unknown) => sent.forEach((s) => answer(s, [error as Error, null])),
    );
  }

  // A lease nothing was published under for a while goes back, so that other instances number
  // the session again without waiting for it to run out. A session whose numbers must skip is
  // remembered until Redis has forgotten the session anyway.
  const idle = setInterval(
    () => {
      const now = Date.now();
      for (const [sessionId, w] of sessions) {
        if (w.lease && !w.sending && !w.due && w.lastPublishAt < now - leaseIdleMs) release(sessionId, w);
        else if (!w.lease && !w.sending && !w.due && w.skipSince !== null && w.skipSince < now - config.idleTtlMs)
          sessions.delete(sessionId);
      }
    },
    Math.max(50, leaseIdleMs / 2),
  );
  idle.unref();

  return {
    publish(sessionId: string, payload: SessionEventPayload): Promise<SessionEvent> {
      const w = writes(sessionId);
      w.lastPublishAt = Date.now();
      // A holder far ahead of Redis hands the lease back rather than show more it may not store.
      if (w.lease && w.lease.next - w.lease.confirmed > MAX_AHEAD) w.yielding = true;
      const numbered = w.lease !== null && !w.yielding;
      const at = new Date().toISOString();
      const event = { ...payload, at, seq: 0, sessionId } as SessionEvent;
      if (numbered) number(w, event);
      const batch = w.lease && !numbered ? (w.later ??= new Batch(false)) : (w.due ??= new Batch(numbered));
      const published = new Promise<SessionEvent>((resolve, reject) => {
        batch.events.push(event);
        batch.json.push(JSON.stringify({ ...payload, at }));
        batch.settle.push({ resolve, reject });
      });
      schedule(sessionId);
      return published;
    },

    /** The seq this instance last gave the session under its lease; null when Redis numbers it. */
    position(sessionId: string): number | null {
      const lease = sessions.get(sessionId)?.lease;
      return lease ? lease.next - 1 : null;
    },

    holds: (sessionId: string) => sessions.get(sessionId)?.lease != null,

    /** Settles once the events this instance has shown for the session so far are stored (or refused). */
    async stored(sessionId: string) {
      const w = sessions.get(sessionId);
      const shown = [w?.sending, w?.due].filter((b): b is Batch => b?.numbered === true);
      await Promise.all(shown.map((b) => b.answered));
    },

    /**
     * Sends what is due, waits (a while at most) for every session's events to be stored, then
     * hands every lease back: the connection may close after.
     */
    async close() {
      closed = true;
      clearInterval(idle);
      for (const sessionId of sessions.keys()) ready.add(sessionId);
      flush();
      const deadline = Date.now() + CLOSE_WAIT_MS;
      const busy = () => [...sessions.values()].some((w) => w.sending || w.due || w.later);
      while (busy() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      await Promise.all(
        [...sessions].filter(([, w]) => w.lease).map(([sessionId]) => scripts.parleyRelease(ownerKey(sessionId), instance).catch(() => {})),
      );
    },
  };
}
