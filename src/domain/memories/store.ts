import type { Db } from '../../db/database.ts';
import type { Prisma } from '../../generated/prisma/client.ts';
import { newId } from '../core/ids.ts';

/** A fact to keep, with the key that tells it from the facts already kept. */
export interface FactToKeep {
  agentId: string;
  userId: string;
  sessionId: string;
  fact: string;
  key: string;
}

const newestFirst = [{ createdAt: 'desc' }, { id: 'desc' }] satisfies Prisma.MemoryOrderByWithRelationInput[];

/**
 * What `recall` reads, as a relation of an agent read for several users at once (the agents of
 * prompts that arrive together are read in one statement): all each user's facts, newest
 * first; `recalledFacts` picks one user's.
 */
export const memoriesOf = (userIds: string[]) =>
  ({ where: { userId: { in: userIds } }, orderBy: newestFirst, select: { fact: true, userId: true } }) satisfies Prisma.Agent$memoriesArgs;

/** What agents remember, on Prisma. */
export function memoryStore(db: Db) {
  return {
    /**
     * Inserts the facts not kept yet, and then keeps at most `cap` per agent and user, the
     * newest, in one statement. The trim cannot see the rows inserted beside it, so for each
     * agent and user it keeps as many fewer of the older ones as were added; concurrent trims of
     * the same memory agree on what is past the cap.
     */
    async keep(rows: FactToKeep[], cap: number) {
      await db.$executeRaw`
        WITH f AS (
          SELECT * FROM unnest(
            ${rows.map(() => newId())}::text[], ${rows.map((r) => r.agentId)}::text[], ${rows.map((r) => r.userId)}::text[],
            ${rows.map((r) => r.sessionId)}::text[], ${rows.map((r) => r.fact)}::text[], ${rows.map((r) => r.key)}::text[]
          ) AS f("id", "agentId", "userId", "sessionId", "fact", "key")
        ),
        added AS (
          INSERT INTO "Memory" ("id", "agentId", "userId", "sessionId", "fact", "key") SELECT * FROM f
          ON CONFLICT ("agentId", "userId", "key") DO NOTHING
          RETURNING "agentId", "userId"
        ),
        room AS (
          SELECT p."agentId", p."userId",
            GREATEST(0, ${cap} - (SELECT count(*) FROM added a WHERE a."agentId" = p."agentId" AND a."userId" = p."userId")) AS "older"
          FROM (SELECT DISTINCT "agentId", "userId" FROM f) AS p
        )
        DELETE FROM "Memory" WHERE "id" IN (
          SELECT past."id" FROM room CROSS JOIN LATERAL (
            SELECT "id" FROM "Memory" AS m WHERE m."agentId" = room."agentId" AND m."userId" = room."userId"
            ORDER BY m."createdAt" DESC, m."id" DESC OFFSET room."older"
          ) AS past
        )`;
    },

    /** The user's latest `take` facts the agent keeps, newest first. */
    recent(agentId: string, userId: string, take: number) {
      const { where, ...rest } = memoriesOf([userId]);
      return db.memory.findMany({ where: { ...where, agentId }, ...rest, take });
    },

    /** Everything the agent keeps about the user, newest first. */
    list: (agentId: string, userId: string) => db.memory.findMany({ where: { agentId, userId }, orderBy: newestFirst }),

    /** Forgets one fact (by id) or all of them; returns how many. */
    async forget(agentId: string, userId: string, memoryId?: string) {
      const { count } = await db.memory.deleteMany({ where: { agentId, userId, ...(memoryId !== undefined ? { id: memoryId } : {}) } });
      return count;
    },
  };
}

export type MemoryStore = ReturnType<typeof memoryStore>;
