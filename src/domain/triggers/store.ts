import { recordWebhookEvent, type WebhookEventInput } from '../webhooks/index.ts';
import type { Db } from '../../db/database.ts';
import type { Prisma, Trigger, TriggerRun } from '../../generated/prisma/client.ts';
import type { TriggerSessionTarget, TriggerStatus } from '../../generated/prisma/enums.ts';
import { newestFirst } from '../core/ordering.ts';
import { isUniqueViolation } from '../core/stores/prisma-errors.ts';

/** The relations a reader wants with a trigger (GraphQL's selection), passed through to the read. */
export type TriggerQuery = { include?: Prisma.TriggerInclude };
/** A trigger as read with `Q`: its columns and the relations `Q` includes. */
export type TriggerRead<Q extends TriggerQuery> = Trigger & Prisma.TriggerGetPayload<Q>;
export type { Trigger, TriggerRun };

/** What a trigger is made of, as the rules decided it. */
export interface TriggerData {
  /** Given when the rules chose it (a new trigger); else the database's. */
  id?: string;
  name: string;
  prompt: string;
  context: string | null;
  cron: string | null;
  timezone: string;
  startDate: Date | null;
  endDate: Date | null;
  sessionTarget: TriggerSessionTarget;
  sessionId: string | null;
  status: Exclude<TriggerStatus, 'running'>;
  nextRun: Date | null;
  errorCount?: number;
}

/** A run about to start: on schedule (the occurrence it is for, and what comes after it) or by hand. */
export type Claim =
  | { runId: string; at: Date; scheduledFor: Date; next: Date | null; status: 'active' | 'finished' }
  | { runId: string; at: Date; scheduledFor: null };

/** A claim of one trigger. */
export interface TriggerClaim {
  triggerId: string;
  claim: Claim;
}

/** Where a run's prompt went. */
export interface RunLink {
  runId: string;
  sessionId: string;
  messageId: string | null;
}

/** How a run ended. */
/** A run's end for its owner's webhooks: the ids (the run and its trigger are added as REST shows them, before the first try). */
const runEvent = (trigger: Trigger, run: TriggerRun): WebhookEventInput => ({
  userId: trigger.userId,
  type: run.status === 'completed' ? 'trigger.run.completed' : 'trigger.run.failed',
  data: { trigger_id: trigger.id, agent_id: trigger.agentId, run_id: run.id, session_id: run.sessionId, message_id: run.messageId },
});

export type RunOutcome = { status: 'completed' } | { status: 'failed'; error: string };

/** A position in a trigger's runs (newest first). */
export interface RunPosition {
  startedAt: Date;
  id: string;
}

/** What a session is to a trigger that posts into it. */
export type SessionFit = 'fits' | 'missing' | 'not-owner' | 'agent-absent';

/** A reply as a run reads its outcome: its status, error, and the errors of its tool calls. */
export interface ReplyOutcome {
  status: string;
  error: string | null;
  toolErrors: string[];
}

/** Where agents' scheduled prompts and their runs are kept. */
export interface TriggerStore {
  /** The agent's owner and visibility, or null when there is no such agent. */
  agent(agentId: string): Promise<{ id: string; ownerId: string; public: boolean } | null>;
  /** Whether `sessionId` is `userId`'s own session with `agentId` in it. */
  sessionFit(sessionId: string, userId: string, agentId: string): Promise<SessionFit>;
  /** One trigger of an agent `ownerId` owns (of `agentId`, when given). */
  findOwned<Q extends TriggerQuery = object>(ownerId: string, id: string, query?: Q, agentId?: string): Promise<TriggerRead<Q> | null>;
  /** The triggers of every agent `ownerId` owns (or of one), newest first. */
  listOwned<Q extends TriggerQuery = object>(ownerId: string, query?: Q, agentId?: string): Promise<TriggerRead<Q>[]>;
  /** Triggers by id, whoever owns them (for the runner); those that exist. */
  findMany(ids: readonly string[]): Promise<Trigger[]>;
  /** A trigger's runs, newest first, from a position. */
  runs(triggerId: string, from: RunPosition | null, take: number): Promise<TriggerRun[]>;
  /** One run. */
  run(runId: string): Promise<TriggerRun | null>;
  /** Creates a trigger unless its user has `cap` already (counted under a lock on the user). */
  createWithin<Q extends TriggerQuery = object>(
    userId: string,
    agentId: string,
    cap: number,
    data: TriggerData,
    query?: Q,
  ): Promise<TriggerRead<Q> | null>;
  update<Q extends TriggerQuery = object>(id: string, data: Partial<TriggerData>, query?: Q): Promise<TriggerRead<Q> | null>;
  /** Deletes a trigger and its runs; false when it was gone already. */
  remove(id: string): Promise<boolean>;
  /**
   * Starts runs, in one statement: each trigger must be idle (and, on schedule, active and due
   * for exactly `scheduledFor`), and a run row is unique per occurrence (a second run for an
   * occurrence fails the statement; alone, it is simply not claimed). The triggers claimed, as
   * they are after (each held by its claim's run: `runningRunId`).
   */
  claim(claims: readonly TriggerClaim[]): Promise<Trigger[]>;
  /**
   * Takes over a claimed run whose prompt was never sent: true for the one caller that moved
   * `runningSince` from `since` to `at`.
   */
  renewLease(triggerId: string, runId: string, since: Date | null, at: Date): Promise<boolean>;
  /** The prompt a reply answers. */
  promptOf(messageId: string): Promise<string | null>;
  /**
   * The prompt a run sent that was never linked to it (its instance died between the two): the
   * owner's message with the run's text, made since the run began, in a session no other run
   * links (or in the trigger's own session); with the reply that answers it.
   */
  unlinkedPrompt(
    run: Pick<TriggerRun, 'startedAt'>,
    trigger: Pick<Trigger, 'userId' | 'agentId' | 'sessionTarget' | 'sessionId'>,
    content: string,
  ): Promise<{ sessionId: string; replyId: string | null } | null>;
  /** Links each run to the session and reply its prompt went into. */
  linkRuns(links: readonly RunLink[]): Promise<void>;
  /**
   * Ends a run still running and frees its trigger, in one transaction: a failure counts
   * (`pauseAfter` in a row pause an active trigger and drop its next run), a completion resets
   * the count. The run and trigger after, or null when the run was settled already.
   */
  settle(
    runId: string,
    outcome: RunOutcome,
    pauseAfter: number,
  ): Promise<{ run: TriggerRun; trigger: Trigger | null; paused: boolean } | null>;
  /** How the replies to a run's prompt ended. */
  /** Notes that a job waits for the occurrence `at`, unless the next run has moved on since. */
  markQueued(id: string, at: Date): Promise<void>;
  /** Active scheduled triggers with no next run planned (kept from before, or loaded as data), a batch at a time. */
  unplanned(take: number): Promise<Trigger[]>;
  /**
   * Triggers whose next run, due by `until`, has no job queued yet (it was further ahead when
   * planned, or a process stopped between the two), soonest first, a batch at a time.
   */
  unqueued(until: Date, take: number): Promise<Trigger[]>;
  /**
   * Triggers with a run under way that no live reply accounts for: its reply is no longer being
   * written (or was never linked to the run), or the run began before `stuckBefore`. By id after
   * `after`, a batch at a time.
   */
  underWay(after: string | null, stuckBefore: Date, take: number): Promise<Trigger[]>;
}

type Tx = Prisma.TransactionClient;

export function triggerStore(db: Db): TriggerStore {
  return { ...triggerRows(db), ...runRows(db), ...promptReads(db), ...planning(db) };
}

/** The triggers themselves, and the agents and sessions their rules check. */
function triggerRows(
  db: Db,
): Pick<TriggerStore, 'agent' | 'sessionFit' | 'findOwned' | 'listOwned' | 'findMany' | 'createWithin' | 'update' | 'remove'> {
  return {
    agent: (agentId) => db.agent.findUnique({ where: { id: agentId }, select: { id: true, ownerId: true, public: true } }),

    async sessionFit(sessionId, userId, agentId) {
      const session = await db.session.findUnique({
        where: { id: sessionId },
        select: { ownerId: true, agents: { where: { agentId }, select: { agentId: true } } },
      });
      if (!session) return 'missing';
      if (session.ownerId !== userId) return 'not-owner';
      return session.agents.length ? 'fits' : 'agent-absent';
    },

    async findOwned<Q extends TriggerQuery>(ownerId: string, id: string, query?: Q, agentId?: string) {
      const where = { id, agent: { ownerId }, ...(agentId ? { agentId } : {}) };
      return (await db.trigger.findFirst({ where, ...query })) as TriggerRead<Q> | null;
    },

    async listOwned<Q extends TriggerQuery>(ownerId: string, query?: Q, agentId?: string) {
      const where = { agent: { ownerId }, ...(agentId ? { agentId } : {}) };
      return (await db.trigger.findMany({ where, orderBy: newestFirst, ...query })) as TriggerRead<Q>[];
    },

    findMany: (ids) => db.trigger.findMany({ where: { id: { in: [...ids] } } }),

    createWithin: <Q extends TriggerQuery>(userId: string, agentId: string, cap: number, data: TriggerData, query?: Q) =>
      db.$transaction(async (tx) => {
        await tx.$queryRaw`SELECT 1 FROM "User" WHERE "id" = ${userId} FOR UPDATE`;
        if ((await tx.trigger.count({ where: { userId } })) >= cap) return null;
        return (await tx.trigger.create({ data: { ...data, userId, agentId }, ...query })) as TriggerRead<Q>;
      }),

    async update<Q extends TriggerQuery>(id: string, data: Partial<TriggerData>, query?: Q) {
      const { count } = await db.trigger.updateMany({ where: { id }, data });
      return count ? ((await db.trigger.findUnique({ where: { id }, ...query })) as TriggerRead<Q> | null) : null;
    },

    async remove(id) {
      const { count } = await db.trigger.deleteMany({ where: { id } });
      return count > 0;
    },
  };
}

/** A trigger's count of failures in a row after a run, and whether that pauses it (only an active one pauses). */
const afterRun = (before: Pick<Trigger, 'errorCount' | 'status'>, error: string | null, pauseAfter: number) => {
  const errorCount = error === null ? 0 : before.errorCount + 1;
  return { errorCount, paused: error !== null && errorCount >= pauseAfter && before.status === 'active' };
};

/**
 * Frees the trigger an ended run held, with the run's error counted (its row locked, so that
 * the count read is the count written over); null when the run no longer held it.
 */
async function release(tx: Tx, run: TriggerRun, error: string | null, pauseAfter: number) {
  const [held] = await tx.$queryRaw<
    { id: string }[]
  >`SELECT "id" FROM "Trigger" WHERE "id" = ${run.triggerId} AND "runningRunId" = ${run.id} FOR UPDATE`;
  if (!held) return null;
  const before = await tx.trigger.findUniqueOrThrow({ where: { id: run.triggerId } });
  const { errorCount, paused } = afterRun(before, error, pauseAfter);
  const trigger = await tx.trigger.update({
    where: { id: run.triggerId },
    data: {
      runningRunId: null,
      runningSince: null,
      errorCount,
      ...(error !== null ? { lastError: error } : {}),
      ...(paused ? { status: 'paused', nextRun: null } : {}),
    },
  });
  return { trigger, paused };
}

/** Runs, from their claim to their settlement. */
function runRows(db: Db): Pick<TriggerStore, 'runs' | 'run' | 'claim' | 'renewLease' | 'linkRuns' | 'settle'> {
  return {
    runs: (triggerId, from, take) =>
      db.triggerRun.findMany({
        where: {
          triggerId,
          ...(from ? { OR: [{ startedAt: { lt: from.startedAt } }, { startedAt: from.startedAt, id: { lt: from.id } }] } : {}),
        },
        orderBy: [{ startedAt: 'desc' }, { id: 'desc' }],
        take,
      }),

    run: (runId) => db.triggerRun.findUnique({ where: { id: runId } }),

    async claim(claims) {
      // One statement for every claim, not a transaction of several each: on the embedded
      // database a transaction holds the one connection across every round trip between its
      // statements, and a hundred runs due at once queue behind each other's. The runs' insert is
      // part of the statement, so a second run for an occurrence fails the whole of it.
      const at = (d: Date | null) => d?.toISOString() ?? null;
      const scheduled = (c: Claim) => (c.scheduledFor === null ? null : c);
      try {
        return await db.$queryRaw<Trigger[]>`
          WITH v AS (
            SELECT * FROM unnest(
              ${claims.map((c) => c.triggerId)}::text[], ${claims.map((c) => c.claim.runId)}::text[],
              ${claims.map((c) => at(c.claim.at))}::timestamp(3)[], ${claims.map((c) => at(c.claim.scheduledFor))}::timestamp(3)[],
              ${claims.map((c) => at(scheduled(c.claim)?.next ?? null))}::timestamp(3)[], ${claims.map((c) => scheduled(c.claim)?.status ?? null)}::text[]
            ) AS v(trigger_id, run_id, at, scheduled_for, next_run, status)
          ), claimed AS (
            UPDATE "Trigger" AS t SET "runningRunId" = v.run_id, "runningSince" = v.at, "lastRunTime" = v.at, "updatedAt" = v.at,
              "nextRun" = CASE WHEN v.scheduled_for IS NULL THEN t."nextRun" ELSE v.next_run END,
              "status" = COALESCE(v.status::"TriggerStatus", t."status")
            FROM v
            WHERE t."id" = v.trigger_id AND t."runningRunId" IS NULL
              AND (v.scheduled_for IS NULL OR (t."status" = 'active' AND t."nextRun" = v.scheduled_for))
            RETURNING t.*
          ), run AS (
            INSERT INTO "TriggerRun" ("id", "triggerId", "scheduledFor", "startedAt")
            SELECT v.run_id, v.trigger_id, v.scheduled_for, v.at FROM claimed JOIN v ON v.run_id = claimed."runningRunId"
          )
          SELECT * FROM claimed`;
      } catch (e) {
        // This occurrence has a run already: whoever made it runs it.
        if (isUniqueViolation(e) && claims.length === 1) return [];
        throw e;
      }
    },

    async renewLease(triggerId, runId, since, at) {
      const { count } = await db.trigger.updateMany({
        where: { id: triggerId, runningRunId: runId, runningSince: since },
        data: { runningSince: at },
      });
      return count > 0;
    },

    async linkRuns(links) {
      await db.$executeRaw`
        UPDATE "TriggerRun" AS r SET "sessionId" = v.session_id, "messageId" = v.message_id
        FROM unnest(${links.map((l) => l.runId)}::text[], ${links.map((l) => l.sessionId)}::text[], ${links.map((l) => l.messageId)}::text[])
          AS v(run_id, session_id, message_id)
        WHERE r."id" = v.run_id`;
    },

    settle: (runId, outcome, pauseAfter) =>
      db.$transaction(async (tx) => {
        // The trigger's row before the run's, the order a delete of the trigger (or of its agent)
        // takes them in, its runs going with it: the other way round the two deadlocked.
        await tx.$queryRaw`SELECT t."id" FROM "Trigger" AS t JOIN "TriggerRun" AS r ON r."triggerId" = t."id" WHERE r."id" = ${runId} FOR UPDATE OF t`;
        const finishedAt = new Date();
        const error = outcome.status === 'failed' ? outcome.error : null;
        const ended = await tx.triggerRun.updateMany({
          where: { id: runId, status: 'running' },
          data: { status: outcome.status, error, finishedAt },
        });
        if (!ended.count) return null;
        const run = await tx.triggerRun.findUniqueOrThrow({ where: { id: runId } });
        const released = await release(tx, run, error, pauseAfter);
        const settled = released
          ? { run, ...released }
          : { run, trigger: await tx.trigger.findUnique({ where: { id: run.triggerId } }), paused: false };
        if (settled.trigger) await recordWebhookEvent(tx, runEvent(settled.trigger, run));
        return settled;
      }),
  };
}

/** What a run reads of the messages its prompt made: the prompt, and how its replies ended. */
function promptReads(db: Db): Pick<TriggerStore, 'promptOf' | 'unlinkedPrompt'> {
  return {
    promptOf: async (messageId) =>
      (await db.message.findUnique({ where: { id: messageId }, select: { promptId: true } }))?.promptId ?? null,

    async unlinkedPrompt(run, trigger, content) {
      const prompt = await db.message.findFirst({
        where: {
          role: 'user',
          senderId: trigger.userId,
          content,
          createdAt: { gte: run.startedAt },
          session:
            trigger.sessionTarget === 'existing'
              ? { id: trigger.sessionId ?? '' }
              : { ownerId: trigger.userId, agents: { some: { agentId: trigger.agentId } }, triggerRuns: { none: {} } },
        },
        orderBy: { createdAt: 'asc' },
        select: { id: true, sessionId: true },
      });
      if (!prompt) return null;
      const reply = await db.message.findFirst({ where: { promptId: prompt.id, role: 'assistant' }, select: { id: true } });
      return { sessionId: prompt.sessionId, replyId: reply?.id ?? null };
    },
  };
}

/** Which next runs are planned and queued, and which runs are under way: what `sweep` reads to mend what a stopped process left. */
function planning(db: Db): Pick<TriggerStore, 'markQueued' | 'unplanned' | 'unqueued' | 'underWay'> {
  return {
    async markQueued(id, at) {
      // Bookkeeping, not a change of the trigger: `updatedAt` stays.
      await db.$executeRaw`UPDATE "Trigger" SET "queuedFor" = ${at} WHERE "id" = ${id} AND "nextRun" = ${at}`;
    },

    // A range of the partial index on "nextRun" (`Trigger_unqueued_next_idx`): the triggers due
    // later are not read.
    unqueued: (until, take) =>
      db.$queryRaw<Trigger[]>`
        SELECT * FROM "Trigger" WHERE "nextRun" IS NOT NULL AND "nextRun" IS DISTINCT FROM "queuedFor" AND "nextRun" <= ${until}
        ORDER BY "nextRun", "id" LIMIT ${take}`,

    unplanned: (take) =>
      db.trigger.findMany({
        where: { status: 'active', nextRun: null, cron: { not: null }, runningRunId: null },
        orderBy: { id: 'asc' },
        take,
      }),

    // The partial index `Trigger_running_idx` holds only the running: idle triggers are not
    // read, and a run whose reply is streaming is passed over here, in one statement, not looked
    // at one by one (a thousand runs started together are each being written).
    underWay: (after, stuckBefore, take) =>
      db.$queryRaw<Trigger[]>`
        SELECT t.* FROM "Trigger" AS t JOIN "TriggerRun" AS r ON r."id" = t."runningRunId"
        WHERE t."runningRunId" IS NOT NULL AND t."id" > ${after ?? ''}
          AND (r."startedAt" < ${stuckBefore}
            OR NOT EXISTS (SELECT 1 FROM "Message" AS m WHERE m."id" = r."messageId" AND m."status" = 'streaming'))
        ORDER BY t."id" LIMIT ${take}`,
  };
}
