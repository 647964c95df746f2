import type { Redis } from 'ioredis';

/**
 * A Lua script as a command on this connection (ioredis sends EVALSHA, and the script itself
 * once if Redis lacks it). Without `numberOfKeys`, the first argument says how many keys follow.
 */
export function redisScript<T>(
  redis: Redis,
  name: string,
  lua: string,
  numberOfKeys?: number,
): (...args: (string | number)[]) => Promise<T> {
  if (!(name in redis)) redis.defineCommand(name, { lua, numberOfKeys });
  const command = (redis as unknown as Record<string, (...args: (string | number)[]) => Promise<T>>)[name]!;
  return (...args) => command.apply(redis, args);
}

/** Lua that sets `now` to Redis's clock in milliseconds: one clock for every instance's deadlines. */
export const LUA_NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;
