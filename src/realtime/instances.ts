import type { Redis } from 'ioredis';
import { connectRedis } from '../redis/client.ts';

const aliveKey = (instanceId: string) => `parley:instance:${instanceId}`;

export interface InstanceRegistry {
  /** Of these instances, the ones that are not alive (their heartbeat lapsed). */
  gone(instanceIds: string[]): Promise<string[]>;
  close(): Promise<void>;
}

/**
 * Which instances are alive, for instances that share a Redis: each renews a key of its own
 * every `heartbeatMs`, which lapses `3 × heartbeatMs` after its last renewal. An instance killed
 * outright is thus known to be gone within seconds, and one merely slow (a long GC pause, a
 * blocked event loop) is not mistaken for dead.
 */
export function instanceRegistry(url: string, instanceId: string, heartbeatMs: number, keyPrefix = ''): InstanceRegistry {
  const redis: Redis = connectRedis(url, 'instances', keyPrefix);
  const beat = () => redis.set(aliveKey(instanceId), String(process.pid), 'PX', heartbeatMs * 3).catch(() => {});
  void beat();
  const timer = setInterval(beat, heartbeatMs);
  timer.unref();
  return {
    async gone(instanceIds) {
      if (instanceIds.length === 0) return [];
      const alive = await redis.mget(...instanceIds.map(aliveKey));
      return instanceIds.filter((_, i) => alive[i] === null);
    },
    async close() {
      clearInterval(timer);
      // Leaving cleanly: nothing of ours is left to recover, so others need not wait for the key.
      await redis.del(aliveKey(instanceId)).catch(() => {});
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
