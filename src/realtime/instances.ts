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
 * every `heartbeatMs`, which lapses `3 × heartbeatMs` after its last renewal. A peer counts as
 * gone only once its key has been seen missing for that whole grace period, as observed since
 * this instance last (re)connected to Redis: a Redis restarted or emptied loses every key at
 * once, and the peers that are alive put theirs back within a heartbeat; they must not be
 * mistaken for dead meanwhile. An instance killed outright is known to be gone within seconds
 * more, and one merely slow (a long GC pause, a blocked event loop) is not mistaken for dead.
 */
export function instanceRegistry(
  url: string,
  instanceId: string,
  heartbeatMs: number,
  keyPrefix = '',
  log?: { warn(obj: unknown, msg?: string): void },
): InstanceRegistry {
  const redis: Redis = connectRedis(url, 'instances', keyPrefix, log);
  const graceMs = heartbeatMs * 3;
  /** Peers seen without their key, and since when (reset on every reconnect of ours). */
  const missingSince = new Map<string, number>();
  const beat = () => redis.set(aliveKey(instanceId), String(process.pid), 'PX', graceMs).catch(() => {});
  redis.on('ready', () => {
    missingSince.clear();
    // Ours first: an emptied Redis should not leave this instance looking dead to the others.
    void beat();
  });
  const timer = setInterval(beat, heartbeatMs);
  timer.unref();
  return {
    async gone(instanceIds) {
      if (instanceIds.length === 0) return [];
      const alive = await redis.mget(...instanceIds.map(aliveKey));
      const now = Date.now();
      for (const id of missingSince.keys()) if (!instanceIds.includes(id)) missingSince.delete(id);
      return instanceIds.filter((id, i) => {
        if (alive[i] !== null) {
          missingSince.delete(id);
          return false;
        }
        const since = missingSince.get(id) ?? now;
        missingSince.set(id, since);
        return now - since >= graceMs;
      });
    },
    async close() {
      clearInterval(timer);
      // Leaving cleanly: nothing of ours is left to recover, so others need not wait for the key.
      await redis.del(aliveKey(instanceId)).catch(() => {});
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
