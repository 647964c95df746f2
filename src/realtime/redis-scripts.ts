import type { Redis } from 'ioredis';
import type { EventsConfig } from '../config.ts';

/**
 * The Lua scripts behind the Redis bus. Each runs atomically: Redis executes a script to its end
 * with no other client's command in between. That is what makes a session's numbering safe across
 * instances without locks of our own: checking who holds the session's lease, giving the next
 * seq, storing the events under it, trimming the log and telling the watching instances happen as
 * one step (the same for a user's feed, in keys of its own), so two instances never give the same seq, no instance is told of an event the stream
 * does not hold yet, and a trim never races a write.
 */

/**
 * A channel's keys, in its kind's space (`parley` for sessions, `parley:feed` for users' feeds).
 * The braces keep a channel's keys in one hash slot of a Redis Cluster, as a script needs.
 */
export const seqKey = (space: string, id: string) => `${space}:seq:{${id}}`;
export const streamKey = (space: string, id: string) => `${space}:events:{${id}}`;
const bytesKey = (space: string, id: string) => `${space}:event-bytes:{${id}}`;
export const ownerKey = (space: string, id: string) => `${space}:seq-owner:{${id}}`;
const wantedKey = (space: string, id: string) => `${space}:seq-wanted:{${id}}`;
/** Where a kind's live events go out on pub/sub: this prefix, then the channel's id. */
export const livePrefix = (space: string) => `${space}:live:`;

/**
 * How many events a lease holder may show its watchers beyond what Redis has confirmed. A lease
 * that ends badly makes the next events skip past at least this many numbers, so none the holder
 * may have shown unstored is used again. A holder that gets this far ahead hands the lease back.
 */
export const MAX_AHEAD = 100_000;

/**
 * How a batch of events is written (PUBLISH's ARGV[6]): who numbers it, and what becomes of the
 * session's lease.
 */
export const WriteMode = {
  /** Redis numbers the events. */
  redis: 'n',
  /** Redis numbers them and grants this instance the session's lease: a reply is streaming. */
  lease: 'l',
  /** This instance numbered them under its lease; Redis checks that they follow on and stores them. */
  confirm: 'c',
  /** Redis numbers them past whatever a lease this instance lost may have shown unstored. */
  skip: 'j',
} as const;
export type WriteMode = (typeof WriteMode)[keyof typeof WriteMode];

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
 * Who numbers (`WriteMode`): Redis (modes `n`, `l`, `j`), or, while it holds the session's lease,
 * the instance that writes a reply there, which numbers its own events and shows them to its own
 * watchers at once; Redis then only checks that they follow on (`c`, confirm), else answers -2
 * and stores nothing. While another instance holds a live lease, numbering here is refused (-1)
 * and a wish is left (KEYS[5], naming who waits) that makes the holder hand the lease back at its
 * next confirmation and keeps it from being granted again until the one who waits got through.
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
const CURRENT = `${FIRST_SEQ}
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

/** The scripts as commands of a connection and of its pipelines. */
export interface Scripts {
  parleyPublish(...args: (string | number)[]): Promise<[first: number, lease: number, prev: number]>;
  parleyRelease(owner: string, instance: string): Promise<number>;
  parleyCurrent(seq: string, stream: string, ttl: number): Promise<number>;
}

/** Makes the scripts commands of `commands` (ioredis sends each by its hash once Redis has it). */
export function defineScripts(commands: Redis): Redis & Scripts {
  commands.defineCommand('parleyPublish', { numberOfKeys: 5, lua: PUBLISH });
  commands.defineCommand('parleyRelease', { numberOfKeys: 1, lua: RELEASE });
  commands.defineCommand('parleyCurrent', { numberOfKeys: 2, lua: CURRENT });
  return commands as Redis & Scripts;
}

/** What one batch tells PUBLISH: its five keys, then ARGV in the order the script reads it. */
export interface PublishCall {
  /** The kind's key space, and the channel (a session, a user's feed). */
  space: string;
  id: string;
  config: Pick<EventsConfig, 'replayLimit' | 'idleTtlMs' | 'replayBytes'>;
  instance: string;
  mode: WriteMode;
  /** Under `confirm`, the seq this instance gave the first event; else 0. */
  expected: number;
  leaseMs: number;
  events: readonly string[];
}

export const publishArgs = ({ space, id, config, instance, mode, expected, leaseMs, events }: PublishCall): (string | number)[] => [
  seqKey(space, id),
  streamKey(space, id),
  bytesKey(space, id),
  ownerKey(space, id),
  wantedKey(space, id),
  config.replayLimit,
  config.idleTtlMs,
  livePrefix(space) + id,
  config.replayBytes,
  instance,
  mode,
  expected,
  leaseMs,
  ...events,
];
