import type { LimitsConfig } from '../config.ts';
import { tooMany } from '../domain/core/errors.ts';
import type { StreamLimits } from '../domain/core/stream-limits.ts';
import type { SlotStore } from './slots.ts';
import type { WarnLog } from './throttled-log.ts';

const nothingHeld = () => {};

export function streamLimits(
  store: SlotStore,
  config: Pick<LimitsConfig, 'maxSubscriptionsPerKey' | 'maxStreamsPerKey'>,
  log: WarnLog,
): StreamLimits {
  return {
    async hold(viewer, kind) {
      // Callers inside the service (no key) are not limited.
      if (!viewer.keyId) return nothingHeld;
      // Braces: a Redis Cluster keeps one key's pools in one hash slot, as a script needs.
      const subscriptions = { pool: `{${viewer.keyId}}:subscriptions`, limit: config.maxSubscriptionsPerKey };
      const streams = { pool: `{${viewer.keyId}}:streams`, limit: config.maxStreamsPerKey };
      let grant;
      try {
        grant = await store.acquire(kind === 'stream' ? [subscriptions, streams] : [subscriptions]);
      } catch (err) {
        // The store is unreachable: better uncounted than refused.
        log.warn({ err }, 'open subscriptions and streams are not being counted: their store failed');
        return nothingHeld;
      }
      if ('release' in grant) return () => grant.release();
      if (grant.full === streams.pool) {
        throw tooMany(
          'TOO_MANY_STREAMS',
          `Too many replies streaming for this API key (at most ${config.maxStreamsPerKey} at once); wait for one to end, or send without stream and watch the session`,
        );
      }
      throw tooMany(
        'TOO_MANY_SUBSCRIPTIONS',
        `Too many open subscriptions and event streams for this API key (at most ${config.maxSubscriptionsPerKey}); close one first`,
      );
    },
  };
}
