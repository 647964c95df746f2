import type { Redis } from 'ioredis';
import { redisScript } from './redis-script.ts';

/** Requests counted so far in the current window of one subject, and when that window ends. */
export interface WindowCount {
  count: number;
  resetInMs: number;
}

/**
 * Fixed windows: a subject's first request opens a window of `windowMs`, every request in it
 * counts, and the count starts again once it has passed. Shared through Redis by every instance,
 * or kept in this process.
 */
export interface WindowCounter {
  hit(subject: string, windowMs: number): Promise<WindowCount>;
  close(): void;
}

export function memoryWindowCounter(): WindowCounter {
  const windows = new Map<string, { count: number; endsAt: number }>();
  // Subjects that stopped calling are forgotten, so a flood of addresses holds memory for one window.
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [subject, w] of windows) if (w.endsAt <= now) windows.delete(subject);
  }, 10_000);
  sweep.unref();
  return {
    async hit(subject, windowMs) {
      const now = Date.now();
      let w = windows.get(subject);
      if (!w || w.endsAt <= now) windows.set(subject, (w = { count: 0, endsAt: now + windowMs }));
      w.count++;
      return { count: w.count, resetInMs: w.endsAt - now };
    },
    close: () => clearInterval(sweep),
  };
}

/**
 * INCR and PEXPIRE in one script, so no instance sees a count without its expiry: the window is
 * the key's lifetime, set by the request that created it. A key found without an expiry (one
 * written by hand, say) gets one rather than counting for ever.
 */
const HIT = `
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
`;

export function redisWindowCounter(redis: Redis, prefix = 'parley:rate:'): WindowCounter {
  const hit = redisScript<[number, number]>(redis, 'parleyRateHit', HIT, 1);
  return {
    async hit(subject, windowMs) {
      const [count, ttl] = await hit(`${prefix}${subject}`, windowMs);
      return { count, resetInMs: ttl };
    },
    close: () => {},
  };
}
