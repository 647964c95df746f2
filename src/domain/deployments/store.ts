import type { Db } from '../../db/database.ts';
import type { Deployment, Prisma } from '../../generated/prisma/client.ts';
import type { DeploymentPlatform } from '../../generated/prisma/enums.ts';
import { newestFirst } from '../core/ordering.ts';
import { type SealedKey, sealedKeysSql, type SealedTables, sealedTablesSql } from './sealed-keys.ts';
import { newId } from '../core/ids.ts';
import { isRecordGone, isUniqueViolation } from '../core/stores/prisma-errors.ts';

/** The relations a reader wants with a deployment (GraphQL's selection), passed through to the read. */
export type DeploymentQuery = { include?: Prisma.DeploymentInclude };
/** A deployment as read with `Q`; never its secrets, which the client omits from every read. */
export type DeploymentRead<Q extends DeploymentQuery> = Omit<Deployment & Prisma.DeploymentGetPayload<Q>, 'secrets'>;
export type DeploymentRow = Omit<Deployment, 'secrets'>;

/** A deployment's `config` as written. */
export type ConfigJson = Prisma.InputJsonObject;

/** A deployment as it is kept, with its sealed secrets (null: none). */
export type KeptDeployment = DeploymentRow & { sealed: string | null };

/** What the rules write of a deployment; a field left out keeps what the row has. */
export interface DeploymentChange {
  config?: ConfigJson;
  sealed?: string;
  account?: string | null;
  accountId?: string | null;
  running?: boolean;
  valid?: boolean;
  lastError?: string | null;
}

/** The account the secrets open is another deployment's: `holder` is that one (null: it went meanwhile). */
export class AccountTaken extends Error {
  override name = 'AccountTaken';
  constructor(readonly holder: { agentId: string; agentName: string; ownerId: string } | null) {
    super('the account is held by another deployment');
  }
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
  forAgent(agentId: string, platform: DeploymentPlatform): Promise<KeptDeployment | null>;
  /** The agent's deployments, newest first. */
  listForAgent<Q extends DeploymentQuery = object>(agentId: string, query?: Q): Promise<DeploymentRead<Q>[]>;
  /**
   * Changes the agent's deployment to the platform with its row locked, in one transaction, so
   * that concurrent writers take turns: `decide` is given the row as it is then (null: there was
   * none, and `create` made it) and its id, and returns what to write. Null when there is no such
   * deployment and `create` is not given, or the agent is gone. Throws AccountTaken, and what
   * `decide` throws (nothing is written then).
   */
  change<Q extends DeploymentQuery = object>(
    key: { agentId: string; platform: DeploymentPlatform },
    create: { userId: string } | null,
    decide: (kept: KeptDeployment | null, id: string) => DeploymentChange,
    query?: Q,
  ): Promise<DeploymentRead<Q> | null>;
  /** Deletes the agent's deployment to the platform, its sealed secrets with it; false when there was none. */
  remove(agentId: string, platform: DeploymentPlatform): Promise<boolean>;
  /** How many deployments there are (of every agent). */
  count(): Promise<number>;
  /** Deployments in id order after `afterId` with their sealed secrets (null: none), for resealing them all. */
  sealedAfter(afterId: string | null, limit: number): Promise<{ id: string; sealed: string | null }[]>;
  /** Replaces sealed secrets unless they changed meanwhile; false when they had. */
  replaceSealed(id: string, from: string, to: string): Promise<boolean>;
  /** The sealed secrets of the deployments `ids` (null: none), to tell which a key here opens. */
  sealedFor(ids: string[]): Promise<Map<string, string | null>>;
  /** The key ids secrets are sealed with, and how many deployments each (what a start needs keys for). */
  /** The keys deployments' and webhooks' secrets are sealed with, and how many of each. */
  sealedKeys(): Promise<SealedKey[]>;
}

const keptOf = ({ secrets, ...row }: Deployment): KeptDeployment => ({ ...row, sealed: sealedOf(secrets) });

/** The deployment holding an account on a platform, and whose agent it is. */
async function holderOf(db: Db, platform: DeploymentPlatform, accountId: string) {
  const row = await db.deployment.findFirst({
    where: { platform, accountId },
    select: { agentId: true, agent: { select: { name: true, ownerId: true } } },
  });
  return row && { agentId: row.agentId, agentName: row.agent.name, ownerId: row.agent.ownerId };
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
      return row && keptOf(row);
    },

    async listForAgent<Q extends DeploymentQuery>(agentId: string, query?: Q) {
      return (await db.deployment.findMany({ where: { agentId }, orderBy: newestFirst, ...query })) as DeploymentRead<Q>[];
    },

    async change<Q extends DeploymentQuery>(
      { agentId, platform }: { agentId: string; platform: DeploymentPlatform },
      create: { userId: string } | null,
      decide: (kept: KeptDeployment | null, id: string) => DeploymentChange,
      query?: Q,
    ) {
      let accountId: string | null | undefined;
      try {
        return await db.$transaction(async (tx) => {
          // A new row waits, uncommitted, for `decide`: a concurrent writer meets it here and takes its turn after.
          const made = create
            ? (await tx.deployment.createMany({ data: [{ id: newId(), agentId, platform, userId: create.userId }], skipDuplicates: true }))
                .count > 0
            : false;
          const [locked] = await tx.$queryRaw<{ id: string }[]>`
            SELECT "id" FROM "Deployment" WHERE "agentId" = ${agentId} AND "platform"::text = ${platform} FOR UPDATE`;
          if (!locked) return null;
          const kept = await tx.deployment.findUniqueOrThrow({ where: { id: locked.id }, omit: { secrets: false } });
          const { sealed, ...fields } = decide(made ? null : keptOf(kept), locked.id);
          accountId = fields.accountId;
          return (await tx.deployment.update({
            where: { id: locked.id },
            data: { ...fields, ...(sealed === undefined ? {} : { secrets: { sealed } }) },
            ...query,
          })) as unknown as DeploymentRead<Q>;
        });
      } catch (e) {
        if (isRecordGone(e)) return null;
        if (!isUniqueViolation(e)) throw e;
        // The one unique key a change can break: the account is another deployment's.
        throw new AccountTaken(accountId ? await holderOf(db, platform, accountId) : null);
      }
    },

    async remove(agentId, platform) {
      return (await db.deployment.deleteMany({ where: { agentId, platform } })).count > 0;
    },

    count: () => db.deployment.count(),

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
      // Webhooks' and MCP servers' secrets are sealed with the same key, so a key that opens none of them is as missing.
      const [tables] = await db.$queryRawUnsafe<[SealedTables]>(sealedTablesSql);
      return db.$queryRawUnsafe<SealedKey[]>(sealedKeysSql(tables));
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
