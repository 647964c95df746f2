import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { LUA_NOW, redisScript } from './redis-script.ts';

/** A pool of slots with a limit, such as one key's open subscriptions. */
export interface SlotClaim {
  pool: string;
  limit: number;
}

/** Either the slots were taken (`release` gives them back, once), or the first pool that was full. */
export type SlotGrant = { release(): void } | { full: string };

/**
 * Counts what is held open at once (subscriptions, streams), across every instance with Redis.
 * `acquire` takes one slot in each pool or none at all.
 */
export interface SlotStore {
  acquire(claims: SlotClaim[]): Promise<SlotGrant>;
  close(): Promise<void>;
}

export function memorySlotStore(): SlotStore {
  const held = new Map<string, number>();
  return {
    async acquire(claims) {
      const full = claims.find((c) => (held.get(c.pool) ?? 0) >= c.limit);
      if (full) return { full: full.pool };
      for (const c of claims) held.set(c.pool, (held.get(c.pool) ?? 0) + 1);
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          for (const c of claims) {
            const n = (held.get(c.pool) ?? 1) - 1;
            if (n > 0) held.set(c.pool, n);
            else held.delete(c.pool);
          }
        },
      };
    },
    async close() {},
  };
}

/**
 * Each pool is a sorted set of holders scored by when their hold lapses, on Redis's clock (so
 * instances' clocks need not agree). Holders are refreshed by their instance every third of the
 * TTL; an instance that dies stops refreshing, and its holders are dropped by the next acquire
 * once the TTL has passed, so a crash leaks slots for one TTL at most. Pools nobody holds expire.
 */
const ACQUIRE = `
${LUA_NOW}
local ttl = tonumber(ARGV[2])
for i, pool in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', pool, '-inf', now)
  if redis.call('ZCARD', pool) >= tonumber(ARGV[i + 2]) then return i end
end
for _, pool in ipairs(KEYS) do
  redis.call('ZADD', pool, now + ttl, ARGV[1])
  redis.call('PEXPIRE', pool, ttl)
end
return 0
`;

/** KEYS: pools; ARGV: the TTL, then one holder per pool. Only holders still present are renewed. */
const REFRESH = `
${LUA_NOW}
local ttl = tonumber(ARGV[1])
for i, pool in ipairs(KEYS) do
  if redis.call('ZADD', pool, 'XX', 'CH', now + ttl, ARGV[i + 1]) == 1 then redis.call('PEXPIRE', pool, ttl) end
end
return 0
`;

export interface RedisSlotOptions {
  ttlMs: number;
  log: { warn(obj: unknown, msg?: string): void };
  prefix?: string;
}

export function redisSlotStore(redis: Redis, options: RedisSlotOptions): SlotStore {
  const prefix = options.prefix ?? 'parley:slots:';
  const acquire = redisScript<number>(redis, 'parleySlotAcquire', ACQUIRE);
  const refresh = redisScript<number>(redis, 'parleySlotRefresh', REFRESH);
  const instance = randomUUID();
  let next = 0;
  /** Holder id to the pools it holds a slot in. */
  const holders = new Map<string, string[]>();

  const heartbeat = setInterval(
    () => {
      const pairs = [...holders].flatMap(([holder, pools]) => pools.map((pool) => [pool, holder] as const));
      if (pairs.length === 0) return;
      refresh(pairs.length, ...pairs.map(([pool]) => pool), options.ttlMs, ...pairs.map(([, holder]) => holder)).catch((err) =>
        options.log.warn({ err }, 'open subscriptions and streams could not be renewed in Redis'),
      );
    },
    Math.max(100, Math.floor(options.ttlMs / 3)),
  );
  heartbeat.unref();

  return {
    async acquire(claims) {
      const holder = `${instance}:${++next}`;
      const pools = claims.map((c) => `${prefix}${c.pool}`);
      const full = await acquire(pools.length, ...pools, holder, options.ttlMs, ...claims.map((c) => c.limit));
      if (full > 0) return { full: claims[full - 1]!.pool };
      holders.set(holder, pools);
      return {
        release() {
          if (!holders.delete(holder)) return;
          const multi = redis.multi();
          for (const pool of pools) multi.zrem(pool, holder);
          // Not given back (Redis down): the slot lapses after its TTL like a crashed holder's.
          multi.exec().catch((err) => options.log.warn({ err }, 'a slot could not be given back in Redis; it lapses on its own'));
        },
      };
    },
    async close() {
      clearInterval(heartbeat);
    },
  };
}
