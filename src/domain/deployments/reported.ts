import type { SecretSealer } from './ports.ts';
import type { DeploymentStore } from './store.ts';

type Reported = { id: string; running: boolean; valid: boolean; lastError: string | null };

/**
 * Deployments as they are, not only as their owners left them. One its owner runs (`running`)
 * runs only where its sealed secrets can be opened: with no key here (SECRETS_KEY unset, the data
 * directory's key left behind in a move) or sealed under a key this service does not have, it
 * is shown not running (`running` false, so its state is `stopped`) with why in `lastError`. It
 * starts by itself once the key is given, and deploying it again with its token mends it too.
 * Every place a deployment is shown (REST, GraphQL, the owner's feed) shows it through this.
 */
export function reportedDeployments(store: Pick<DeploymentStore, 'sealedFor'>, sealer: SecretSealer) {
  return async <R extends Reported>(rows: R[]): Promise<R[]> => {
    const meant = rows.filter((r) => r.running && r.valid);
    if (!meant.length) return rows;
    const why = new Map<string, string>();
    if (sealer.problem) for (const r of meant) why.set(r.id, sealer.problem);
    else {
      const sealed = await store.sealedFor(meant.map((r) => r.id));
      for (const r of meant) {
        const text = sealed.get(r.id);
        const problem = text && sealer.cannotOpen(text);
        if (problem) why.set(r.id, `${problem}: start the service with that key, or deploy it again with its token`);
      }
    }
    return rows.map((r) => (why.has(r.id) ? { ...r, running: false, lastError: `Not running: ${why.get(r.id)}` } : r));
  };
}

export type ReportedDeployments = ReturnType<typeof reportedDeployments>;
