import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';
import { throttledWarnings, type WarnLog } from '../limits/throttled-log.ts';

// Loaded on first use: a service without REDIS_URL never needs it, and it is one of the larger
// modules a start would otherwise load (about 0.1 s of it).
const require = createRequire(import.meta.url);

/**
 * A connection to the Redis named by REDIS_URL. Commands wait (bounded by a few reconnects, or by
 * `commandTimeoutMs` where given) while it reconnects, so a Redis restart delays events and
 * counts instead of failing them at once; a blocking reader needs a connection of its own, hence
 * the name, which also shows in `CLIENT LIST`.
 */
export function connectRedis(url: string, role: string, keyPrefix = '', log?: WarnLog, commandTimeoutMs?: number): Redis {
  const { Redis: Client } = require('ioredis') as typeof import('ioredis');
  const redis = new Client(url, {
    // For work a request waits on: past this it gives up on Redis rather than wait out reconnects.
    commandTimeout: commandTimeoutMs,
    connectionName: `parley:${role}`,
    // Keys only (pub/sub channels carry session and key ids, unique anyway): lets deployments
    // that must stay apart, or test apps, share one Redis.
    keyPrefix,
    maxRetriesPerRequest: 3,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
  });
  // Without a listener, ioredis prints every failed reconnect as an unhandled error event; during
  // an outage that is a line or more a second per connection. One warning per interval is enough.
  const warnings = throttledWarnings(log ?? { warn: () => {} });
  let failures = 0;
  redis.on('error', (err: Error) => {
    failures++;
    warnings.warn({ err: { message: err.message }, connection: role, failures }, 'Redis is unreachable; retrying');
  });
  redis.on('ready', () => (failures = 0));
  return redis;
}
