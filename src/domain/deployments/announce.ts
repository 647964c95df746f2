import type { EventBus } from '../core/bus.ts';
import { stateOf } from './service.ts';
import type { DeploymentRow } from './store.ts';

/**
 * Tells a deployment's owner, on their feed, what state it is in now (deployed, stopped, found
 * invalid by the platform, deleted), with the last error it met. Fields are named one by one: neither its
 * config nor its secrets can reach the feed.
 */
export function deploymentAnnouncer(bus: EventBus, log: { error(obj: unknown, msg?: string): void }) {
  return async (row: DeploymentRow, deleted = false) => {
    try {
      await bus.feeds.publish(row.userId, {
        type: 'deployment_state',
        deploymentId: row.id,
        agentId: row.agentId,
        platform: row.platform,
        state: stateOf(row),
        valid: row.valid,
        lastError: row.lastError,
        deleted,
      });
    } catch (err) {
      log.error({ err, deployment: row.id }, 'could not tell the owner of a deployment of its state');
    }
  };
}
