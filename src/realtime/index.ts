import type { Config } from '../config.ts';
import type { EventBus } from '../domain/core/bus.ts';
import type { WarnLog } from '../limits/throttled-log.ts';
import { createMemoryBus } from './memory-bus.ts';
import { createRedisBus } from './redis-bus.ts';

/** The bus a deployment's configuration asks for: shared through Redis when there is one, else in process. */
export function createEventBus(config: Pick<Config, 'redisUrl' | 'redisKeyPrefix' | 'events'>, log?: WarnLog): EventBus {
  return config.redisUrl ? createRedisBus(config.redisUrl, config.events, config.redisKeyPrefix, log) : createMemoryBus(config.events);
}
