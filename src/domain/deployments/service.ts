import type { Db } from '../../db/database.ts';
import type { Prisma } from '../../generated/prisma/client.ts';
import { notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { newestFirst } from '../core/ordering.ts';
import type { Viewer } from '../core/viewer.ts';

export type DeploymentQuery = { include?: Prisma.DeploymentInclude };

export function deploymentService(db: Db) {
  return {
    /** One deployment, for the owner of its agent only. */
    async get(viewer: Viewer, id: string, query: DeploymentQuery = {}) {
      const row = canNameARow(id) ? await db.deployment.findFirst({ where: { id, agent: { ownerId: viewer.id } }, ...query }) : null;
      if (!row) throw notFound('Deployment not found');
      return row;
    },

    /** Deployments of every agent the caller owns, newest first. `secrets` is omitted by the client. */
    listMine(viewer: Viewer, query: DeploymentQuery = {}) {
      return db.deployment.findMany({ where: { agent: { ownerId: viewer.id } }, orderBy: newestFirst, ...query });
    },
  };
}

export type DeploymentService = ReturnType<typeof deploymentService>;
