import type { Redis } from 'ioredis';
import type { LimitsConfig } from '../config.ts';
import { createRateLimiter, type RateLimiter } from './rate-limit.ts';
import { memorySlotStore, redisSlotStore } from './slots.ts';
import type { StreamLimits } from '../domain/core/stream-limits.ts';
import { streamLimits } from './streams.ts';
import { throttledWarnings, type WarnLog } from './throttled-log.ts';
import { memoryWindowCounter, redisWindowCounter } from './window-counter.ts';

export interface Limits {
  rate: RateLimiter;
  streams: StreamLimits;
  close(): Promise<void>;
}

/** Rate limits and open-stream limits, counted in Redis (shared by every instance) when given one. */
export function createLimits(config: LimitsConfig, redis: Redis | undefined, log: WarnLog): Limits {
  const warn = throttledWarnings(log);
  const counter = redis ? redisWindowCounter(redis) : memoryWindowCounter();
  const slots = redis ? redisSlotStore(redis, { ttlMs: config.slotTtlMs, log: warn }) : memorySlotStore();
  return {
    rate: createRateLimiter(config.rate, counter, warn),
    streams: streamLimits(slots, config, warn),
    async close() {
      counter.close();
      await slots.close();
    },
  };
}
