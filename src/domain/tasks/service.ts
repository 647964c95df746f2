import { numberedByBytes, rowsThatFit } from '../core/byte-pages.ts';
import { badInput, forbidden, insufficientManna, notFound, tooMany } from '../core/errors.ts';
import { decodeCursor, encodeCursor } from '../core/cursors.ts';
import { canNameARow } from '../core/ids.ts';
import { type Manna, mannaNumber } from '../core/manna.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { checkArgumentValues } from '../tools/arguments.ts';
import { costOf } from '../tools/cost-of.ts';
import type { ToolDefinition } from '../tools/definition.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { TaskEventPayload, TaskEvents } from './events.ts';
import {
  cancelTaskSchema,
  costTaskSchema,
  createTaskSchema,
  taskConnectionPage,
  taskFilterSchema,
  taskPageSchema,
  type OutputType,
  type TaskFilterInput,
} from './inputs.ts';
import { type DeadRunnerWatch, recoverAbandonedTasks, watchForDeadTaskRunners } from './recovery.ts';
import { CANCELLED, type TaskRunner } from './runner.ts';
import type { CreateRefused, Task, TaskFilter, TaskQuery, TaskRead, TaskStore } from './store.ts';

export const TASK_NOT_FOUND = 'Task not found';

export interface TaskServiceDeps {
  store: TaskStore;
  registry: ToolRegistry;
  /** Keys of the tools this service can run (those with a handler). */
  runnable: ReadonlySet<string>;
  runner: TaskRunner;
  events: TaskEvents;
  /** Names this process on the tasks it runs. */
  instanceId: string;
  /** Tasks one user may have pending or running at once. */
  unsettledPerUser: number;
  /** A page of tasks stops before about this many bytes as a list shows them (at least one task). */
  listPageMaxBytes: number;
  log: { error(obj: unknown, msg?: string): void };
}

/** A task is its user's; a public one anyone may read. */
export const canReadTask = (viewer: Viewer, task: Pick<Task, 'userId' | 'public'>) => task.public || task.userId === viewer.id;

/** The tool's `output_type`, as a task shows it (null for a tool the registry no longer has). */
export const outputTypeOf = (registry: ToolRegistry, tool: string): OutputType | null => registry.get(tool)?.output_type ?? null;

/** The tool and its checked arguments, and their price; or a 400 naming the field. */
function priced(deps: Pick<TaskServiceDeps, 'registry' | 'runnable'>, raw: { tool: string; args: Record<string, unknown> }) {
  const tool = deps.registry.isAvailable(raw.tool) ? deps.registry.get(raw.tool) : undefined;
  if (!tool) throw badInput(`there is no tool named "${raw.tool}"`, ['tool']);
  if (!deps.runnable.has(tool.key)) throw badInput(`${tool.key} cannot run on this server (it has no handler here)`, ['tool']);
  const checked = checkArgumentValues(tool, raw.args);
  if (!('args' in checked)) throw badInput(checked.message, ['args', ...checked.path]);
  return { tool, args: checked.args, cost: costOf(tool, checked.args) };
}

/** Why `create` took nothing, as the caller is told. */
function refusal(refused: CreateRefused, cost: Manna, unsettledPerUser: number) {
  if (refused.refused === 'busy')
    return tooMany('RATE_LIMITED', `Too many tasks waiting: at most ${unsettledPerUser} of yours may be pending or running at once`);
  // The original's words, which its clients show.
  return insufficientManna(`Insufficient manna balance. Need ${cost} but only have ${refused.balance}`);
}

/** A task just made, as its owner's feed shows it. */
const createdEvent = (made: Task, outputType: OutputType, cost: Manna): TaskEventPayload => ({
  type: 'task_created',
  taskId: made.id,
  task: {
    id: made.id,
    tool: made.tool,
    outputType,
    status: made.status,
    cost: mannaNumber(cost),
    agentId: null,
    sessionId: null,
    createdAt: made.createdAt.toISOString(),
  },
});

/** Which tools a list's `tool`, `output_type` and `type` leave (undefined: all of them). */
function toolsOf(registry: ToolRegistry, f: TaskFilterInput): string[] | undefined {
  if (!f.tool && !f.outputType && !f.type) return undefined;
  const fits = (t: ToolDefinition) =>
    (!f.outputType || t.output_type === f.outputType) && (!f.type || (t.output_type === 'lora') === (f.type === 'concepts'));
  const keys = registry
    .all()
    .filter(fits)
    .map((t) => t.key);
  return f.tool ? keys.filter((k) => k === f.tool) : keys;
}

const filterOf = (registry: ToolRegistry, viewer: Viewer, f: TaskFilterInput): TaskFilter => ({
  userId: viewer.id,
  statuses: f.status,
  ids: f.taskId,
  tools: toolsOf(registry, f),
  sessionId: f.sessionId,
  minDate: f.minDate,
  orderBy: f.orderBy,
  direction: f.direction,
});

/** Where a connection's `after` cursor points: the ordering date and the id that breaks its ties. */
const positionAfter = (after: string) =>
  decodeCursor('task', after, (v) => {
    const [at, id] = [v.slice(0, v.indexOf('|')), v.slice(v.indexOf('|') + 1)];
    const date = new Date(at);
    return Number.isNaN(date.getTime()) || !id ? null : { at: date, id };
  });

async function readable<Q extends TaskQuery = object>(store: TaskStore, viewer: Viewer, id: string, query?: Q): Promise<TaskRead<Q>> {
  const task = canNameARow(id) ? await store.find(id, query) : null;
  if (!task || !canReadTask(viewer, task)) throw notFound(TASK_NOT_FOUND);
  return task;
}

/** Reading tasks: one, a watch of one, and the caller's lists; none of it changes a task. */
function taskReads(store: TaskStore, registry: ToolRegistry, listPageMaxBytes: number) {
  return {
    get: <Q extends TaskQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<TaskRead<Q>> => readable(store, viewer, id, query),

    /**
     * What narrows a watch of the caller's feed to one task (`GET /v2/tasks/events?taskId=`,
     * `taskUpdates(taskId:)`): the task must be the caller's own, whose events are on their feed
     * (another's, public or not, is not found). Checked before the watch opens.
     */
    async followed(viewer: Viewer, taskId: string): Promise<(event: { taskId: string }) => boolean> {
      const task = canNameARow(taskId) ? await store.find(taskId) : null;
      if (!task || task.userId !== viewer.id) throw notFound(TASK_NOT_FOUND);
      return (event) => event.taskId === task.id;
    },

    /** A numbered page of the caller's tasks (reply tool calls among them), as the original's list; cut by bytes, `cut` says where. */
    async page<Q extends TaskQuery = object>(viewer: Viewer, raw: unknown, query?: Q) {
      const { page, limit, ...filters } = parseInput(taskPageSchema, raw);
      const filter = filterOf(registry, viewer, filters);
      const { rows, total, cut } = await numberedByBytes(
        { page, limit, maxBytes: listPageMaxBytes },
        {
          ids: () => store.ids(filter),
          sizes: (ids) => store.listedSizes(ids),
          rows: (ids) => store.list({ ...filter, ids }, { skip: 0, take: ids.length }, query),
        },
      );
      return { tasks: rows, total, page, limit, cut };
    },

    /** A forward page of the caller's tasks for a connection, cut by bytes as `page` is, with the cursor of each. */
    async connection<Q extends TaskQuery = object>(viewer: Viewer, rawFilter: unknown, rawPage: unknown, query?: Q) {
      const filters = parseInput(taskFilterSchema, rawFilter ?? {});
      const { first, after } = parseInput(taskConnectionPage, rawPage);
      const filter = filterOf(registry, viewer, filters);
      const position = after === undefined ? undefined : positionAfter(after);
      const rows = await store.list(filter, { take: first + 1, after: position }, query);
      const sizes = rows.length ? await store.listedSizes(rows.map((r) => r.id)) : new Map<string, number>();
      const fit = rowsThatFit(
        rows.map((r) => sizes.get(r.id) ?? 0),
        first,
        listPageMaxBytes,
      );
      const cursor = (t: Task) => encodeCursor('task', `${t[filter.orderBy].toISOString()}|${t.id}`);
      return { tasks: rows.slice(0, fit), hasNextPage: rows.length > fit, cursor };
    },
  };
}

/**
 * Tasks: tools run by themselves (`create`), listed with the tool calls of replies, which are
 * tasks too. A task is priced and charged as it is created (a hold, with its ledger rows), runs
 * in the background with the same turns as reply tool calls, and settles once: completed (the
 * hold is its charge), failed or cancelled (the hold comes back).
 */
export function taskService(deps: TaskServiceDeps) {
  const { store, registry, runner, events, log } = deps;
  const announce = (userId: string, event: TaskEventPayload) =>
    events.publish(userId, event).catch((err) => log.error({ err }, 'could not publish a task event'));

  return {
    /** What `create` would take for this tool and these arguments. */
    estimate(_viewer: Viewer, raw: unknown): { cost: number } {
      return { cost: mannaNumber(priced(deps, parseInput(costTaskSchema, raw)).cost) };
    },

    /** Creates a task, charging it, and starts it; refused with nothing taken when the balance cannot cover it. */
    async create<Q extends TaskQuery = object>(viewer: Viewer, raw: unknown, query?: Q): Promise<TaskRead<Q>> {
      const input = parseInput(createTaskSchema, raw);
      const { tool, cost } = priced(deps, input);
      const made = await store.create(
        { userId: viewer.id, tool: tool.key, args: input.args, cost, public: input.makePublic, instance: deps.instanceId },
        deps.unsettledPerUser,
      );
      if ('refused' in made) throw refusal(made, cost, deps.unsettledPerUser);
      await announce(viewer.id, createdEvent(made, tool.output_type, cost));
      // Read as created (pending), before the runner moves it on.
      const shown = query ? ((await store.find(made.id, query)) as TaskRead<Q>) : (made as TaskRead<Q>);
      void runner.start(made);
      return shown;
    },

    ...taskReads(store, registry, deps.listPageMaxBytes),

    /**
     * Cancels a pending or running task of the caller's, giving its hold back; a task that had
     * ended already is left as it is. Answers the task's status after.
     */
    async cancel(viewer: Viewer, raw: unknown): Promise<{ taskStatus: Task['status'] }> {
      const { taskId } = parseInput(cancelTaskSchema, raw);
      const task = await readable(store, viewer, taskId);
      if (task.userId !== viewer.id) throw forbidden('Only the task’s owner may cancel it');
      if (task.messageId)
        throw badInput('is a tool call of a reply: it stops with its reply (POST /v2/sessions/{session_id}/cancel)', ['taskId']);
      if (task.status !== 'pending' && task.status !== 'running') return { taskStatus: task.status };
      const saved = await store.settle(task.id, ['pending', 'running'], { status: 'cancelled', error: CANCELLED });
      if (!saved) return { taskStatus: (await store.find(task.id))?.status ?? task.status };
      runner.abort(task.id);
      await announce(viewer.id, { type: 'task_cancelled', taskId: task.id });
      return { taskStatus: saved.status };
    },

    /** Lets this process's tasks finish for up to `graceMs`, then settles the rest as failed. */
    drain: (graceMs: number) => runner.drain(graceMs),

    /** Settles what stopped processes left (`recovery.ts`): all of them with no `instance` (one instance, at start). */
    recoverAbandoned: (instance?: string) => recoverAbandonedTasks(store, events, instance),

    /** With several instances: settles the tasks of each one that stops beating. */
    watchForDeadRunners: (watch: Omit<DeadRunnerWatch, 'self' | 'events'>) =>
      watchForDeadTaskRunners(store, { ...watch, self: deps.instanceId, events }),
  };
}

export type TaskService = ReturnType<typeof taskService>;
