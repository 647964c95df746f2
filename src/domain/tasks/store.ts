import type { Db } from '../../db/database.ts';
import { recordCreations } from '../creations/store.ts';
import { Prisma, type Task } from '../../generated/prisma/client.ts';
import type { TaskStatus } from '../../generated/prisma/enums.ts';
import { returnHold } from '../manna/stores/holds.ts';
import { isNoManna, type Manna } from '../core/manna.ts';
import { debit, spendable } from '../manna/stores/ledger.ts';
import type { CallCreation, ToolStore } from '../tools/ports.ts';
import type { TaskOrderBy } from './inputs.ts';
import { recordWebhookEvent, type WebhookEventInput } from '../webhooks/index.ts';

/** A task's end for its owner's webhooks: its id (the task is added as REST shows it, before the first try). */
const taskEvent = (task: Pick<Task, 'id' | 'userId' | 'status'>): WebhookEventInput => ({
  userId: task.userId,
  type: task.status === 'completed' ? 'task.completed' : task.status === 'cancelled' ? 'task.cancelled' : 'task.failed',
  data: { task_id: task.id },
});

export type { Task };

/** The relations a reader wants with a task (GraphQL's selection, REST's user and outputs), passed through to the read. */
export type TaskQuery = { include?: Prisma.TaskInclude };
/** A task as read with `Q`: its columns and the relations `Q` includes. */
export type TaskRead<Q extends TaskQuery> = Task & Prisma.TaskGetPayload<Q>;
/**
 * A task as a list shows it: `args` and `result` are left out (`{}` and null) where they are
 * over the list's size for one field, and `elided` says which were, so a page of tasks with
 * huge arguments or answers stays small; the task by its id has them whole.
 */
export type ListedTask<Q extends TaskQuery> = TaskRead<Q> & { elided: ('args' | 'result')[] };

/** Which of a user's tasks a list shows. */
export interface TaskFilter {
  userId: string;
  statuses?: TaskStatus[];
  ids?: string[];
  /** Only tasks of these tools (from `tool`, `output_type` and `type`); an empty list matches none. */
  tools?: string[];
  sessionId?: string;
  minDate?: Date;
  orderBy: TaskOrderBy;
  direction: 'asc' | 'desc';
}

/** A numbered page, or a connection's page after a task (its sort value and id). */
export type TaskWindow = { skip: number; take: number } | { take: number; after?: { at: Date; id: string } };

/** A task made by itself, to be saved pending with its hold. */
export interface NewTask {
  userId: string;
  tool: string;
  /** As the caller gave them (the defaults are filled in when it runs). */
  args: Record<string, unknown>;
  cost: Manna;
  public: boolean;
  /** The process that will run it. */
  instance: string;
}

/** Why a task was not created, with nothing taken: the balance, or too many of the user's tasks waiting. */
export type CreateRefused = { refused: 'balance'; balance: Manna } | { refused: 'busy'; unsettled: number };

export interface TaskOutcome {
  status: 'completed' | 'failed' | 'cancelled';
  result?: unknown;
  error?: string;
}

/** Where tasks made by themselves are kept, charged and settled. */
export interface TaskStore {
  /**
   * Saves a task pending and takes its cost from the user's balance, with its ledger rows, in one
   * transaction; or takes nothing and says why (the balance, or `maxUnsettled` of the user's tasks
   * already waiting or running).
   */
  create(task: NewTask, maxUnsettled: number): Promise<Task | CreateRefused>;
  /** Pending to running; false when it is pending no more (cancelled meanwhile). */
  start(id: string): Promise<boolean>;
  /** How far a running task is. */
  progress(id: string, fraction: number): Promise<void>;
  /**
   * Settles a task still in one of `from`, in one transaction: its outcome, its hold returned
   * (refund rows) unless it completed, its creations saved naming it. The task as saved, or null
   * when someone else settled it first (a cancel, a restart's recovery).
   */
  settle(id: string, from: TaskStatus[], outcome: TaskOutcome, creations?: CallCreation[]): Promise<Task | null>;
  find<Q extends TaskQuery = object>(id: string, query?: Q): Promise<TaskRead<Q> | null>;
  list<Q extends TaskQuery = object>(filter: TaskFilter, window: TaskWindow, query?: Q): Promise<ListedTask<Q>[]>;
  count(filter: TaskFilter): Promise<number>;
  /** The ids of the whole list, in its order. */
  ids(filter: TaskFilter): Promise<string[]>;
  /** Roughly the bytes each of these tasks takes in a list as REST writes it (`args` and `result` elided as `list` does). */
  listedSizes(ids: readonly string[]): Promise<Map<string, number>>;
  /** Tasks made by themselves still pending or running, of `instance` (or of any); `take` at most. */
  unsettled(instance: string | undefined, take: number): Promise<Task[]>;
  /** Processes other than `self` with unsettled tasks made by themselves. */
  runners(self: string): Promise<string[]>;
}

/** A hold that must take nothing: thrown inside its transaction so that all of it rolls back. */
class Refusal extends Error {
  constructor(readonly why: CreateRefused) {
    super(why.refused);
  }
}

/** Bytes of `args` or `result` a list shows for one task. */
export const LIST_FIELD_BYTES = 4096;

/**
 * Bytes a task takes in a list, roughly as REST writes it: `args` and `result` as the list shows
 * them (left out over LIST_FIELD_BYTES), its error, its outputs (the creations it made), the rest.
 */
const LISTED_TASK_BYTES = Prisma.sql`(CASE WHEN octet_length(t."args"::text) <= ${LIST_FIELD_BYTES} THEN octet_length(t."args"::text) ELSE 2 END)
  + coalesce(CASE WHEN octet_length(t."result"::text) <= ${LIST_FIELD_BYTES} THEN octet_length(t."result"::text) END, 0)
  + coalesce(octet_length(t."error"), 0) + octet_length(t."tool") + 1000
  + coalesce((SELECT sum(octet_length(c."url") + coalesce(octet_length(c."thumbnail"), 0) + coalesce(octet_length(c."filename"), 0)
      + octet_length(c."mediaAttributes"::text) + 200) FROM "Creation" c WHERE c."taskId" = t."id"), 0)`;

const unsettledStatuses: TaskStatus[] = ['pending', 'running'];
const standalone = { messageId: null, status: { in: unsettledStatuses } } satisfies Prisma.TaskWhereInput;

function whereOf(f: TaskFilter): Prisma.TaskWhereInput {
  return {
    userId: f.userId,
    ...(f.statuses ? { status: { in: f.statuses } } : {}),
    ...(f.ids ? { id: { in: f.ids } } : {}),
    ...(f.tools ? { tool: { in: f.tools } } : {}),
    ...(f.sessionId ? { sessionId: f.sessionId } : {}),
    ...(f.minDate ? { createdAt: { gte: f.minDate } } : {}),
  };
}

/** After a task in the list's order: a later sort value, or the same one and a later id. */
function afterWhere(f: TaskFilter, after: { at: Date; id: string }): Prisma.TaskWhereInput {
  const past = f.direction === 'desc' ? 'lt' : 'gt';
  return { OR: [{ [f.orderBy]: { [past]: after.at } }, { [f.orderBy]: after.at, id: { [past]: after.id } }] };
}

/** Tasks on Prisma: created with their hold, started, settled, listed. */
/** The arguments as the model sent them, kept even when they are not valid JSON. */
function argumentsForRecord(raw: string): Prisma.InputJsonValue {
  try {
    const parsed = JSON.parse(raw) as unknown;
    return parsed !== null && typeof parsed === 'object' ? (parsed as Prisma.InputJsonValue) : { raw };
  } catch {
    return { raw };
  }
}

/**
 * Records the tool calls a reply asked for as pending tasks, after the calls its message already
 * has: the statement the tool host is handed for its calls' rows.
 */
export function recordToolCalls(db: Db): ToolStore['record'] {
  return async ({ messageId, sessionId, agentId, payer }, calls) => {
    const rows = await db.$transaction(async (tx) => {
      const start = await tx.task.count({ where: { messageId } });
      return tx.task.createManyAndReturn({
        data: calls.map((c, i) => ({
          userId: payer,
          agentId,
          sessionId,
          messageId,
          position: start + i,
          callId: c.id,
          tool: c.name,
          args: argumentsForRecord(c.arguments),
        })),
      });
    });
    // Every row here was given its position just above.
    const position = (r: (typeof rows)[number]) => r.position!;
    return rows.sort((a, b) => position(a) - position(b)).map((r) => ({ id: r.id, position: position(r), tool: r.tool }));
  };
}

export function taskStore(db: Db): TaskStore {
  /** The list's `args` and `result` of these tasks, each left out when it is over LIST_FIELD_BYTES. */
  async function boundedFields(ids: string[]) {
    if (!ids.length) return new Map<string, { args: unknown; result: unknown; argsElided: boolean; resultElided: boolean }>();
    const rows = await db.$queryRaw<{ id: string; args: unknown; result: unknown; argsElided: boolean; resultElided: boolean }[]>`
      SELECT "id",
        CASE WHEN octet_length("args"::text) <= ${LIST_FIELD_BYTES} THEN "args" END AS "args",
        CASE WHEN octet_length("result"::text) <= ${LIST_FIELD_BYTES} THEN "result" END AS "result",
        octet_length("args"::text) > ${LIST_FIELD_BYTES} AS "argsElided",
        coalesce(octet_length("result"::text) > ${LIST_FIELD_BYTES}, false) AS "resultElided"
      FROM "Task" WHERE "id" IN (${Prisma.join(ids)})`;
    return new Map(rows.map((r) => [r.id, r]));
  }

  return {
    async create(task, maxUnsettled) {
      const cost = new Prisma.Decimal(task.cost);
      try {
        return await db.$transaction(async (tx) => {
          // One user's creations queue here, so the count of their waiting tasks cannot be outrun.
          await tx.$queryRaw`SELECT 1 FROM "User" WHERE "id" = ${task.userId} FOR UPDATE`;
          const unsettled = await tx.task.count({ where: { ...standalone, userId: task.userId } });
          if (unsettled >= maxUnsettled) throw new Refusal({ refused: 'busy', unsettled });
          const row = await tx.task.create({
            data: {
              userId: task.userId,
              tool: task.tool,
              args: task.args as Prisma.InputJsonValue,
              cost,
              public: task.public,
              instance: task.instance,
            },
          });
          if (!isNoManna(task.cost)) {
            const taken = await debit(tx, task.userId, cost, { reason: `task: ${task.tool}`, taskId: row.id });
            if (!taken) throw new Refusal({ refused: 'balance', balance: await spendable(tx, task.userId) });
          }
          return row;
        });
      } catch (e) {
        if (e instanceof Refusal) return e.why;
        throw e;
      }
    },

    async start(id) {
      const { count } = await db.task.updateMany({ where: { id, status: 'pending' }, data: { status: 'running' } });
      return count === 1;
    },

    async progress(id, fraction) {
      await db.task.updateMany({ where: { id, status: 'running' }, data: { progress: fraction } });
    },

    settle: (id, from, outcome, creations = []) =>
      db.$transaction(async (tx) => {
        const data = {
          status: outcome.status,
          result: (outcome.result ?? Prisma.JsonNull) as Prisma.InputJsonValue,
          error: outcome.error ?? null,
          ...(outcome.status === 'completed' ? { progress: 1 } : {}),
        };
        // One conditional update claims it: of two parties settling the task, one finds it gone.
        const [claimed] = await tx.task.updateManyAndReturn({ where: { id, status: { in: from } }, data, select: { tool: true } });
        if (!claimed) return null;
        if (outcome.status !== 'completed')
          await returnHold(tx, id, { reason: `refund: ${claimed.tool} ${outcome.status}`, sessionId: null, messageId: null });
        await recordCreations(tx, id, creations);
        const task = await tx.task.findUniqueOrThrow({ where: { id } });
        await recordWebhookEvent(tx, taskEvent(task));
        return task;
      }),

    async find<Q extends TaskQuery>(id: string, query?: Q) {
      return (await db.task.findUnique({ where: { id }, ...query })) as TaskRead<Q> | null;
    },

    async list<Q extends TaskQuery>(filter: TaskFilter, window: TaskWindow, query?: Q) {
      const where = whereOf(filter);
      const after = 'after' in window && window.after ? afterWhere(filter, window.after) : null;
      const rows = (await db.task.findMany({
        ...query,
        where: after ? { AND: [where, after] } : where,
        orderBy: [{ [filter.orderBy]: filter.direction }, { id: filter.direction }],
        ...('skip' in window ? { skip: window.skip } : {}),
        take: window.take,
        omit: { args: true, result: true },
      })) as unknown as TaskRead<Q>[];
      const fields = await boundedFields(rows.map((r) => r.id));
      return rows.map((r) => {
        const f = fields.get(r.id)!;
        const elided = [...(f.argsElided ? (['args'] as const) : []), ...(f.resultElided ? (['result'] as const) : [])];
        return { ...r, args: (f.args ?? {}) as Prisma.JsonValue, result: f.result as Prisma.JsonValue | null, elided };
      });
    },

    count: (filter) => db.task.count({ where: whereOf(filter) }),

    ids: async (filter) =>
      (
        await db.task.findMany({
          where: whereOf(filter),
          orderBy: [{ [filter.orderBy]: filter.direction }, { id: filter.direction }],
          select: { id: true },
        })
      ).map((t) => t.id),

    async listedSizes(ids) {
      const rows = await db.$queryRaw<{ id: string; bytes: number }[]>`
        SELECT t."id", (${LISTED_TASK_BYTES})::int AS "bytes" FROM "Task" t WHERE t."id" = ANY(${[...ids]}::text[])`;
      return new Map(rows.map((r) => [r.id, Number(r.bytes)]));
    },

    unsettled: (instance, take) =>
      db.task.findMany({
        where: { ...standalone, ...(instance !== undefined ? { instance } : {}) },
        orderBy: { createdAt: 'asc' },
        take,
      }),

    async runners(self) {
      const rows = await db.task.findMany({
        where: { ...standalone, instance: { not: self } },
        distinct: ['instance'],
        select: { instance: true },
      });
      return rows.flatMap((r) => (r.instance ? [r.instance] : []));
    },
  };
}
