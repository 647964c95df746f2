import { notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import type { Viewer } from '../core/viewer.ts';
import type { DeploymentQuery, DeploymentRead, DeploymentStore } from './store.ts';

export function deploymentService(store: DeploymentStore) {
  return {
    /** One deployment, for the owner of its agent only. */
    async get<Q extends DeploymentQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<DeploymentRead<Q>> {
      const row = canNameARow(id) ? await store.findOwned(viewer.id, id, query) : null;
      if (!row) throw notFound('Deployment not found');
      return row;
    },

    /** Deployments of every agent the caller owns, newest first. */
    listMine<Q extends DeploymentQuery = object>(viewer: Viewer, query?: Q): Promise<DeploymentRead<Q>[]> {
      return store.listOwned(viewer.id, query);
    },
  };
}

export type DeploymentService = ReturnType<typeof deploymentService>;
