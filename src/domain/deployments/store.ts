import type { Db } from '../../db/database.ts';
import type { Deployment, Prisma } from '../../generated/prisma/client.ts';
import { newestFirst } from '../core/ordering.ts';

/** The relations a reader wants with a deployment (GraphQL's selection), passed through to the read. */
export type DeploymentQuery = { include?: Prisma.DeploymentInclude };
/** A deployment as read with `Q`; never its secrets, which the client omits from every read. */
export type DeploymentRead<Q extends DeploymentQuery> = Omit<Deployment & Prisma.DeploymentGetPayload<Q>, 'secrets'>;

/** Where agents' deployments to platforms are kept. */
export interface DeploymentStore {
  /** One deployment of an agent `ownerId` owns. */
  findOwned<Q extends DeploymentQuery = object>(ownerId: string, id: string, query?: Q): Promise<DeploymentRead<Q> | null>;
  /** The deployments of every agent `ownerId` owns, newest first. */
  listOwned<Q extends DeploymentQuery = object>(ownerId: string, query?: Q): Promise<DeploymentRead<Q>[]>;
}

export function deploymentStore(db: Db): DeploymentStore {
  return {
    async findOwned<Q extends DeploymentQuery>(ownerId: string, id: string, query?: Q) {
      return (await db.deployment.findFirst({ where: { id, agent: { ownerId } }, ...query })) as DeploymentRead<Q> | null;
    },

    async listOwned<Q extends DeploymentQuery>(ownerId: string, query?: Q) {
      return (await db.deployment.findMany({ where: { agent: { ownerId } }, orderBy: newestFirst, ...query })) as DeploymentRead<Q>[];
    },
  };
}
