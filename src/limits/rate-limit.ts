import { isIPv6 } from 'node:net';
import { tierName, type LimitsConfig } from '../config.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import type { WarnLog } from './throttled-log.ts';
import type { WindowCounter } from './window-counter.ts';

/** The outcome of counting one request, with what the `RateLimit-*` headers tell the client. */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window ends (and, when refused, until a request will be accepted). */
  resetSeconds: number;
  windowSeconds: number;
}

export interface RateLimiter {
  /** Counts one request by the key's caller, or by `ip` without one; null where no limit applies. */
  check(caller: Viewer | null, ip: string): Promise<RateDecision | null>;
}

/**
 * Requests per window by the caller's subscription tier, counted per API key; requests without
 * a valid key are counted per client address. If the counter fails (Redis unreachable), requests
 * are let through rather than refused: the limit protects the service, an outage of the counter
 * should not take the service down with it.
 */
export function createRateLimiter(config: LimitsConfig['rate'], counter: WindowCounter, log: WarnLog): RateLimiter {
  return {
    async check(caller, ip) {
      const limit = caller ? (config.perTier[tierName(caller.tier ?? '')] ?? config.default) : config.anonymous;
      if (limit === 0) return null;
      const subject = caller ? (caller.keyId ? `key:${caller.keyId}` : `user:${caller.id}`) : `ip:${addressBlock(ip)}`;
      let counted;
      try {
        counted = await counter.hit(subject, config.windowMs);
      } catch (err) {
        log.warn({ err }, 'rate limits are not being counted: their store failed');
        return null;
      }
      return {
        allowed: counted.count <= limit,
        limit,
        remaining: Math.max(0, limit - counted.count),
        resetSeconds: Math.max(1, Math.ceil(counted.resetInMs / 1000)),
        windowSeconds: Math.ceil(config.windowMs / 1000),
      };
    },
  };
}

/** The refusal's text, and the `extensions` a GraphQL client reads (`retryAfter` in seconds). */
export function rateLimitedError(decision: RateDecision, byKey: boolean) {
  const who = byKey ? 'this API key' : 'this address without an API key';
  return {
    message: `Rate limit exceeded: at most ${decision.limit} requests per ${decision.windowSeconds} s for ${who}; retry in ${decision.resetSeconds} s`,
    extensions: { code: 'RATE_LIMITED', retryAfter: decision.resetSeconds },
  };
}

/**
 * The address a limit applies to: IPv4 addresses (also IPv4-mapped IPv6) as they are; IPv6 by
 * their /64, the block one subscriber usually holds whole, so rotating addresses within it does
 * not give a client a fresh allowance each time.
 */
export function addressBlock(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1]!;
  if (!isIPv6(ip)) return ip;
  const [head = '', tail = ''] = ip.split('::');
  const left = head ? head.split(':') : [];
  const right = ip.includes('::') && tail ? tail.split(':') : [];
  // A trailing dotted IPv4 part stands for two groups.
  const width = (groups: string[]) => groups.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0);
  const groups = ip.includes('::') ? [...left, ...Array(8 - width(left) - width(right)).fill('0'), ...right] : left;
  return `${groups
    .slice(0, 4)
    .map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
