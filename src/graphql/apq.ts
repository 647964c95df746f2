import { createInMemoryAPQStore, useAPQ, type APQStore } from '@graphql-yoga/plugin-apq';
import type { Redis } from 'ioredis';
import type { Plugin } from 'graphql-yoga';
import type { ApqConfig } from '../config.ts';
import { LUA_NOW, redisScript } from '../limits/redis-script.ts';
import type { WarnLog } from '../limits/throttled-log.ts';

/**
 * Longest query text kept. The plugin stores a query before it is parsed, so without this a
 * client could park a megabyte of anything under its hash; a longer query still runs, it is just
 * not remembered (its client keeps sending it whole). Real documents are a few kilobytes.
 */
export const APQ_MAX_QUERY_LENGTH = 32 * 1024;

/**
 * Automatic persisted queries (Apollo's protocol) over POST and GET. A hash the store lacks is
 * answered `PersistedQueryNotFound` (PERSISTED_QUERY_NOT_FOUND) with status 200, as Apollo
 * Server does: Apollo's mobile clients only retry with the full query when the answer is a
 * 200. A query whose hash is wrong is refused with PERSISTED_QUERY_MISMATCH and not stored.
 */
export function persistedQueries(store: APQStore): Plugin {
  return useAPQ({ store, responseConfig: { forceStatusCodeOk: true } });
}

/** Only SHA-256 hashes are looked up: any other string names nothing. */
const SHA256_HEX = /^[0-9a-f]{64}$/;

const bounded = (store: APQStore): APQStore => ({
  get: (hash) => (SHA256_HEX.test(hash) ? store.get(hash) : null),
  set: (hash, query) => (query.length <= APQ_MAX_QUERY_LENGTH ? store.set(hash, query) : undefined),
});

/** In this process: an LRU of `maxEntries` queries, each kept `ttlMs` at most. */
export function memoryApqStore(config: ApqConfig): APQStore {
  return bounded(createInMemoryAPQStore({ max: config.maxEntries, ttl: config.ttlMs }));
}

/** Stores a query and drops the least recently used past `max`. Keys share the `{apq}` hash tag. */
const SET = `
${LUA_NOW}
local prefix, hash, query, ttl, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local index = prefix .. 'index'
redis.call('SET', prefix .. hash, query, 'PX', ttl)
redis.call('ZADD', index, now, hash)
redis.call('ZREMRANGEBYSCORE', index, '-inf', now - ttl)
local extra = redis.call('ZCARD', index) - max
if extra > 0 then
  for _, old in ipairs(redis.call('ZRANGE', index, 0, extra - 1)) do redis.call('DEL', prefix .. old) end
  redis.call('ZREMRANGEBYRANK', index, 0, extra - 1)
end
return 0
`;

/** Reads a query; a hit counts as a use, for the LRU order and its TTL. */
const GET = `
local query = redis.call('GET', ARGV[1] .. ARGV[2])
if query then
  ${LUA_NOW}
  redis.call('ZADD', ARGV[1] .. 'index', 'XX', now, ARGV[2])
  redis.call('PEXPIRE', ARGV[1] .. ARGV[2], ARGV[3])
end
return query
`;

/**
 * Shared by every instance: a client that registered a query with one instance is served by the
 * next. If Redis fails, a hash is simply not found (the client sends the whole query, which runs)
 * rather than the request failing.
 */
export function redisApqStore(redis: Redis, config: ApqConfig, log: WarnLog, prefix = 'parley:{apq}:'): APQStore {
  const set = redisScript<number>(redis, 'parleyApqSet', SET, 0);
  const get = redisScript<string | null>(redis, 'parleyApqGet', GET, 0);
  const failed = (err: unknown) => {
    log.warn({ err }, 'persisted queries could not be read or stored in Redis');
    return null;
  };
  return bounded({
    get: (hash) => get(prefix, hash, config.ttlMs).catch(failed),
    set: (hash, query) => set(prefix, hash, query, config.ttlMs, config.maxEntries).catch(failed),
  });
}
