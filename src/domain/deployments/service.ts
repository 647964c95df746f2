import type { Db } from '../../db/database.ts';
import type { Prisma } from '../../generated/prisma/client.ts';
import { newestFirst } from '../ordering.ts';
import type { Viewer } from '../viewer.ts';

export type DeploymentQuery = { include?: Prisma.DeploymentInclude };

export function deploymentService(db: Db) {
  return {
    /** Deployments of every agent the caller owns, newest first. `secrets` is omitted by the client. */
    listMine(viewer: Viewer, query: DeploymentQuery = {}) {
      return db.deployment.findMany({ where: { agent: { ownerId: viewer.id } }, orderBy: newestFirst, ...query });
    },
  };
}

export type DeploymentService = ReturnType<typeof deploymentService>;
