import type { Db } from '../../db/database.ts';
import type { Deployment, Prisma } from '../../generated/prisma/client.ts';
import type { DeploymentPlatform } from '../../generated/prisma/enums.ts';
import { newestFirst } from '../core/ordering.ts';
import { isUniqueViolation } from '../core/stores/prisma-errors.ts';

/** The relations a reader wants with a deployment (GraphQL's selection), passed through to the read. */
export type DeploymentQuery = { include?: Prisma.DeploymentInclude };
/** A deployment as read with `Q`; never its secrets, which the client omits from every read. */
export type DeploymentRead<Q extends DeploymentQuery> = Omit<Deployment & Prisma.DeploymentGetPayload<Q>, 'secrets'>;
export type DeploymentRow = Omit<Deployment, 'secrets'>;

/** A deployment's `config` as written. */
export type ConfigJson = Prisma.InputJsonObject;

/** A deployment as the rules write it; `sealed` undefined keeps the secrets it has. */
export interface DeploymentWrite {
  id: string;
  agentId: string;
  userId: string;
  platform: DeploymentPlatform;
  config: ConfigJson;
  sealed?: string;
  account?: string | null;
  running?: boolean;
  valid?: boolean;
  lastError?: string | null;
}

/** Two writers made the agent's deployment to one platform at once: the second gives way. */
export class DeploymentRace extends Error {
  override name = 'DeploymentRace';
}

/** The sealed text a row's `secrets` column holds, or null for none. */
export const sealedOf = (secrets: unknown): string | null => {
  const sealed = (secrets as { sealed?: unknown } | null)?.sealed;
  return typeof sealed === 'string' ? sealed : null;
};

/** Where agents' deployments to platforms are kept. */
export interface DeploymentStore {
  /** One deployment of an agent `ownerId` owns. */
  findOwned<Q extends DeploymentQuery = object>(ownerId: string, id: string, query?: Q): Promise<DeploymentRead<Q> | null>;
  /** The deployments of every agent `ownerId` owns, newest first. */
  listOwned<Q extends DeploymentQuery = object>(ownerId: string, query?: Q): Promise<DeploymentRead<Q>[]>;
  /** The owner of an agent, or null for no such agent. */
  agentOwner(agentId: string): Promise<string | null>;
  /** A deployment by its id, without its secrets. */
  byId(id: string): Promise<DeploymentRow | null>;
  /** The agent's deployment to a platform, with its sealed secrets. */
  forAgent(agentId: string, platform: DeploymentPlatform): Promise<(DeploymentRow & { sealed: string | null }) | null>;
  /** The agent's deployments, newest first. */
  listForAgent<Q extends DeploymentQuery = object>(agentId: string, query?: Q): Promise<DeploymentRead<Q>[]>;
  /** Makes the agent's deployment to the platform, or changes it. Throws DeploymentRace. */
  save<Q extends DeploymentQuery = object>(row: DeploymentWrite, query?: Q): Promise<DeploymentRead<Q>>;
  /** Deletes the agent's deployment to the platform, its sealed secrets with it; false when there was none. */
  remove(agentId: string, platform: DeploymentPlatform): Promise<boolean>;
  /** Deployments in id order after `afterId` with their sealed secrets (null: none), for resealing them all. */
  sealedAfter(afterId: string | null, limit: number): Promise<{ id: string; sealed: string | null }[]>;
  /** Replaces sealed secrets unless they changed meanwhile; false when they had. */
  replaceSealed(id: string, from: string, to: string): Promise<boolean>;
  /** The sealed secrets of the deployments `ids` (null: none), to tell which a key here opens. */
  sealedFor(ids: string[]): Promise<Map<string, string | null>>;
  /** The key ids secrets are sealed with, and how many deployments each (what a start needs keys for). */
  sealedKeys(): Promise<{ keyId: string; deployments: number }[]>;
}

export function deploymentStore(db: Db): DeploymentStore {
  return {
    async findOwned<Q extends DeploymentQuery>(ownerId: string, id: string, query?: Q) {
      return (await db.deployment.findFirst({ where: { id, agent: { ownerId } }, ...query })) as DeploymentRead<Q> | null;
    },

    async listOwned<Q extends DeploymentQuery>(ownerId: string, query?: Q) {
      return (await db.deployment.findMany({ where: { agent: { ownerId } }, orderBy: newestFirst, ...query })) as DeploymentRead<Q>[];
    },

    async agentOwner(agentId) {
      return (await db.agent.findUnique({ where: { id: agentId }, select: { ownerId: true } }))?.ownerId ?? null;
    },

    async byId(id) {
      return db.deployment.findUnique({ where: { id } });
    },

    async forAgent(agentId, platform) {
      const row = await db.deployment.findUnique({ where: { agentId_platform: { agentId, platform } }, omit: { secrets: false } });
      if (!row) return null;
      const { secrets, ...rest } = row;
      return { ...rest, sealed: sealedOf(secrets) };
    },

    async listForAgent<Q extends DeploymentQuery>(agentId: string, query?: Q) {
      return (await db.deployment.findMany({ where: { agentId }, orderBy: newestFirst, ...query })) as DeploymentRead<Q>[];
    },

    async save<Q extends DeploymentQuery>({ id, agentId, platform, sealed, ...fields }: DeploymentWrite, query?: Q) {
      const secrets = sealed === undefined ? undefined : { sealed };
      try {
        return (await db.deployment.upsert({
          where: { agentId_platform: { agentId, platform } },
          create: { id, agentId, platform, ...fields, secrets },
          update: { ...fields, secrets },
          ...query,
        })) as DeploymentRead<Q>;
      } catch (e) {
        if (isUniqueViolation(e)) throw new DeploymentRace();
        throw e;
      }
    },

    async remove(agentId, platform) {
      return (await db.deployment.deleteMany({ where: { agentId, platform } })).count > 0;
    },

    async sealedAfter(afterId, limit) {
      const rows = await db.deployment.findMany({
        where: afterId ? { id: { gt: afterId } } : {},
        orderBy: { id: 'asc' },
        take: limit,
        select: { id: true, secrets: true },
      });
      return rows.map((r) => ({ id: r.id, sealed: sealedOf(r.secrets) }));
    },

    async sealedFor(ids) {
      const rows = await db.deployment.findMany({ where: { id: { in: ids } }, select: { id: true, secrets: true } });
      return new Map(rows.map((r) => [r.id, sealedOf(r.secrets)]));
    },

    async sealedKeys() {
      // `parley migrate` composes the services before it migrates: a database not migrated yet holds none.
      const [{ present }] = await db.$queryRaw<[{ present: boolean }]>`SELECT to_regclass('"Deployment"') IS NOT NULL AS "present"`;
      if (!present) return [];
      // The key id is the second part of the sealed text (`v1.<key id>.<nonce>.<tag>.<data>`): no secret.
      const rows = await db.$queryRaw<{ keyId: string; deployments: number }[]>`
        SELECT split_part("secrets"->>'sealed', '.', 2) AS "keyId", count(*)::int AS "deployments"
        FROM "Deployment" WHERE "secrets"->>'sealed' IS NOT NULL GROUP BY 1 ORDER BY 1`;
      return rows;
    },

    async replaceSealed(id, from, to) {
      // Compared as text: the row changes only if it still holds what was opened.
      const changed = await db.$executeRaw`
        UPDATE "Deployment" SET "secrets" = jsonb_build_object('sealed', ${to}::text), "updatedAt" = now()
        WHERE "id" = ${id} AND "secrets"->>'sealed' = ${from}`;
      return changed > 0;
    },
  };
}
