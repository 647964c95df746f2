import { Redis } from 'ioredis';

/**
 * A connection to the Redis named by REDIS_URL. Commands wait (bounded) while it reconnects, so a
 * Redis restart delays events and counts instead of failing them at once; a blocking reader needs
 * a connection of its own, hence the name, which also shows in `CLIENT LIST`.
 */
export function connectRedis(url: string, role: string, keyPrefix = ''): Redis {
  return new Redis(url, {
    connectionName: `parley:${role}`,
    // Keys only (pub/sub channels carry session and key ids, unique anyway): lets deployments
    // that must stay apart, or test apps, share one Redis.
    keyPrefix,
    maxRetriesPerRequest: 3,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
  });
}
