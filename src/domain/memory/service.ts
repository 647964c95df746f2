import type { Db } from '../../db/database.ts';
import type { Prisma } from '../../generated/prisma/client.ts';
import type { ChatProvider } from '../core/chat.ts';
import type { MemoryHost } from '../core/tool-host.ts';
import type { Viewer } from '../core/viewer.ts';
import { coalescedWrites } from '../core/coalesce.ts';
import { notFound } from '../core/errors.ts';
import { canNameARow, newId } from '../core/ids.ts';
import { EXTRACTION_INSTRUCTION, factKey, factsByRule, factsFromAnswer } from './extract.ts';

/** Facts kept per agent and user; past it the oldest go. */
export const MEMORY_CAP = 50;
/** Exchanges whose facts one statement writes at most. */
const LEARNT_PER_STATEMENT = 100;
/** Facts put into a prompt: the most recent. */
const RECALLED = 20;

/** What one exchange taught an agent about a user. */
interface Learnt {
  agentId: string;
  userId: string;
  sessionId: string;
  facts: string[];
}

/**
 * What `recall` reads, as a relation of an agent read for several users at once (the agents of
 * prompts that arrive together are read in one statement): all each user's facts, at most
 * MEMORY_CAP per agent and user, newest first; `recalledFacts` picks one user's.
 */
export const memoriesOf = (userIds: string[]) =>
  ({
    where: { userId: { in: userIds } },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    select: { fact: true, userId: true },
  }) satisfies Prisma.Agent$memoriesArgs;

/** The facts a prompt takes of one user's, from rows newest first: the latest, oldest first. */
export const recalledFacts = (rows: { fact: string; userId: string }[], userId: string) =>
  rows
    .filter((r) => r.userId === userId)
    .slice(0, RECALLED)
    .toReversed()
    .map((r) => r.fact);

/**
 * What agents remember about the people they talk to. After an exchange (unless the user kept
 * it out of memory) the facts about the user are extracted, by a small separate model call or,
 * offline, by rule; kept per agent and user, without duplicates, at most MEMORY_CAP; and the
 * latest go into that agent's later prompts with that user, in any session. The extraction call
 * is housekeeping: it spends nothing of the session's budgets.
 */
export function memoryService(
  db: Db,
  provider: ChatProvider,
  options: { offline: boolean; model: string },
  log: { error(obj: unknown, msg?: string): void },
) {
  async function extract(prompt: string, reply: string, signal: AbortSignal | undefined): Promise<string[]> {
    if (options.offline) return factsByRule(prompt);
    const request = {
      model: options.model,
      messages: [
        { role: 'system' as const, content: EXTRACTION_INSTRUCTION },
        { role: 'user' as const, content: `User: ${prompt.slice(0, 4000)}\n\nAgent: ${reply.slice(0, 4000)}` },
      ],
      tools: [],
      maxTokens: 120,
      reasoningEffort: null,
      agent: { name: '', key: '', description: '', greeting: '', knowledge: '', suggestions: [] },
    };
    const timeout = AbortSignal.timeout(30_000);
    return factsFromAnswer(await provider.complete(request, signal ? AbortSignal.any([signal, timeout]) : timeout));
  }

  /**
   * Facts learnt in exchanges that end together are written by one statement: replies finishing
   * by the thousand each remember. The trim cannot see the rows inserted beside it, so for each
   * agent and user it keeps as many fewer of the older ones as were added; concurrent trims of the
   * same memory agree on what is past the cap.
   */
  const keep = coalescedWrites<Learnt, true>(async (group) => {
    const rows = group.flatMap((l) => l.facts.map((fact) => ({ ...l, fact })));
    await db.$executeRaw`
      WITH f AS (
        SELECT * FROM unnest(
          ${rows.map(() => newId())}::text[], ${rows.map((r) => r.agentId)}::text[], ${rows.map((r) => r.userId)}::text[],
          ${rows.map((r) => r.sessionId)}::text[], ${rows.map((r) => r.fact)}::text[], ${rows.map((r) => factKey(r.fact))}::text[]
        ) AS f("id", "agentId", "userId", "sessionId", "fact", "key")
      ),
      added AS (
        INSERT INTO "Memory" ("id", "agentId", "userId", "sessionId", "fact", "key") SELECT * FROM f
        ON CONFLICT ("agentId", "userId", "key") DO NOTHING
        RETURNING "agentId", "userId"
      ),
      room AS (
        SELECT p."agentId", p."userId",
          GREATEST(0, ${MEMORY_CAP} - (SELECT count(*) FROM added a WHERE a."agentId" = p."agentId" AND a."userId" = p."userId")) AS "older"
        FROM (SELECT DISTINCT "agentId", "userId" FROM f) AS p
      )
      DELETE FROM "Memory" WHERE "id" IN (
        SELECT past."id" FROM room CROSS JOIN LATERAL (
          SELECT "id" FROM "Memory" AS m WHERE m."agentId" = room."agentId" AND m."userId" = room."userId"
          ORDER BY m."createdAt" DESC, m."id" DESC OFFSET room."older"
        ) AS past
      )`;
    return new Map(group.map((l) => [l, true as const]));
  }, LEARNT_PER_STATEMENT);

  const host: MemoryHost = {
    async recall(agentId, userId) {
      const { where, ...rest } = memoriesOf([userId]);
      return recalledFacts(await db.memory.findMany({ where: { ...where, agentId }, ...rest, take: RECALLED }), userId);
    },

    async remember({ agentId, userId, sessionId, prompt, reply }, signal) {
      let facts: string[];
      try {
        facts = await extract(prompt, reply, signal);
      } catch (err) {
        // Given up on shutdown: nothing went wrong.
        if (!signal?.aborted) log.error({ err }, 'could not extract memories');
        return;
      }
      if (facts.length === 0) return;
      await keep.load({ agentId, userId, sessionId, facts: facts.slice(0, MEMORY_CAP) });
    },
  };

  return {
    host,

    /** What an agent remembers about the caller, newest first. */
    list(viewer: Viewer, agentId: string) {
      return db.memory.findMany({ where: { agentId, userId: viewer.id }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] });
    },

    /** Forgets one fact (by id) or everything the agent remembers about the caller; returns how many. */
    async forget(viewer: Viewer, agentId: string, memoryId?: string) {
      if (memoryId !== undefined && !canNameARow(memoryId)) throw notFound('Memory not found');
      const { count } = await db.memory.deleteMany({
        where: { agentId, userId: viewer.id, ...(memoryId !== undefined ? { id: memoryId } : {}) },
      });
      if (memoryId !== undefined && count === 0) throw notFound('Memory not found');
      return count;
    },
  };
}

export type MemoryService = ReturnType<typeof memoryService>;
