import { isDatabaseUnavailable } from '../core/stores/prisma-errors.ts';
import type { SearchService } from '../search/service.ts';
import { checkArgumentValues } from '../tools/arguments.ts';
import { ToolError, type Executor, type ToolOutput } from '../tools/executors/types.ts';
import type { CallCreation } from '../tools/ports.ts';
import type { ToolRegistry } from '../tools/registry.ts';
import type { ToolRunQueue } from '../tools/run-queue.ts';
import type { TaskEventPayload, TaskEvents } from './events.ts';
import type { Task, TaskOutcome, TaskStore } from './store.ts';

export const SERVER_STOPPED = 'The server stopped before the task finished';
export const CANCELLED = 'Cancelled by its owner';

export interface TaskRunnerDeps {
  store: TaskStore;
  registry: ToolRegistry;
  executors: ReadonlyMap<string, Executor>;
  /** The turns reply tool calls take too: one per-user and per-process limit for both. */
  queue: ToolRunQueue;
  search: Pick<SearchService, 'indexCreations'>;
  events: TaskEvents;
  log: { error(obj: unknown, msg?: string): void };
}

/** Why a running task's signal was aborted. */
type Stop = 'cancelled' | 'shutdown';

/** The media a task's tool made, as creations of its user (public when the task is). */
const creationsOf = (output: ToolOutput, task: Task, args: Record<string, unknown>): CallCreation[] =>
  (output.media ?? []).map((m) => ({
    id: m.id,
    userId: task.userId,
    agentId: null,
    tool: task.tool,
    args,
    name: m.name,
    url: m.url,
    thumbnail: m.thumbnail,
    filename: m.filename,
    mediaAttributes: m.mediaAttributes,
    public: task.public,
  }));

/**
 * Runs tasks made by themselves in this process: each waits for a turn (the same queue as
 * reply tool calls), starts, reports progress in order, and is settled once: completed with
 * its creations, or failed with its hold returned. A cancel or a shutdown aborts it where it is.
 */
export function taskRunner(deps: TaskRunnerDeps) {
  const { store, events, log } = deps;
  const running = new Map<string, { stop(why: Stop): void; done: Promise<void> }>();
  /** A change saved is a change made: telling the feed may fail without undoing it. */
  const announce = (userId: string, event: TaskEventPayload) =>
    events.publish(userId, event).catch((err) => log.error({ err }, 'could not publish a task event'));

  /** Settles and announces; false when someone settled it first. */
  async function finish(task: Task, outcome: TaskOutcome, creations: CallCreation[] = []) {
    const saved = await store.settle(task.id, ['pending', 'running'], outcome, creations);
    if (!saved) return false;
    if (outcome.status === 'completed')
      await announce(task.userId, {
        type: 'task_completed',
        taskId: task.id,
        result: (saved.result ?? null) as never,
        outputs: creations.map((c) => ({ creationId: c.id, url: c.url, thumbnail: c.thumbnail })),
        cost: saved.cost?.toNumber() ?? 0,
      });
    else if (outcome.status === 'failed')
      await announce(task.userId, { type: 'task_failed', taskId: task.id, error: outcome.error ?? 'failed' });
    else await announce(task.userId, { type: 'task_cancelled', taskId: task.id });
    return true;
  }

  /** Progress goes out in the order the tool reports it; each step is saved, the latest one last. */
  function progressReporter(task: Task) {
    let best = 0;
    let chain: Promise<unknown> = Promise.resolve();
    const report = (fraction: number, message?: string) => {
      // A retried call starts over; what watchers were told stays true.
      if (!(fraction > best) || fraction > 1) return;
      best = fraction;
      chain = chain
        .then(() => store.progress(task.id, fraction))
        .then(() => announce(task.userId, { type: 'task_progress', taskId: task.id, progress: fraction, message: message ?? null }))
        .catch((err) => log.error({ err, task: task.id }, 'could not report a task’s progress'));
    };
    return { report, settled: () => chain };
  }

  async function execute(task: Task, signal: AbortSignal, stopped: () => Stop | null) {
    const tool = deps.registry.get(task.tool)!;
    const checked = checkArgumentValues(tool, task.args);
    if (!('args' in checked)) return finish(task, { status: 'failed', error: checked.message });
    if (!(await store.start(task.id))) return false;
    await announce(task.userId, { type: 'task_started', taskId: task.id });
    const progress = progressReporter(task);
    try {
      const run = { tool, args: checked.args, userId: task.userId, agentId: null, sessionId: null, signal, progress: progress.report };
      const output = await deps.executors.get(tool.key)!(run);
      await progress.settled();
      const done = await finish(task, { status: 'completed', result: output.result }, creationsOf(output, task, checked.args));
      // Searchable like any other creation; embedding is outside the transaction (a remote call).
      if (done && output.media?.length) await deps.search.indexCreations(output.media.map((m) => m.id));
      return done;
    } catch (e) {
      await progress.settled();
      const why = stopped();
      // A cancel settled it already; a shutdown leaves nobody to finish it later.
      if (why === 'cancelled') return false;
      if (why === 'shutdown') return finish(task, { status: 'failed', error: SERVER_STOPPED });
      if (!(e instanceof ToolError || isDatabaseUnavailable(e))) log.error({ err: e, tool: tool.key }, 'a task failed');
      return finish(task, { status: 'failed', error: e instanceof ToolError ? e.message : 'The tool failed' });
    }
  }

  async function run(task: Task, entry: { stop(why: Stop): void }) {
    const controller = new AbortController();
    let why: Stop | null = null;
    entry.stop = (reason: Stop) => {
      why ??= reason;
      controller.abort(new Error(reason));
    };
    let release: (() => void) | undefined;
    try {
      release = await deps.queue.turn(task.userId, controller.signal);
      await execute(task, controller.signal, () => why);
    } catch (err) {
      // Stopped while waiting for its turn: a cancel settled it; a shutdown must.
      if (why === 'shutdown') await finish(task, { status: 'failed', error: SERVER_STOPPED }).catch(() => {});
      else if (why !== 'cancelled') log.error({ err, task: task.id }, 'could not run a task');
    } finally {
      release?.();
    }
  }

  return {
    /** Starts a task just created; it runs in the background. */
    start(task: Task) {
      const entry = { stop: (_why: Stop) => {}, done: Promise.resolve() };
      running.set(task.id, entry);
      entry.done = run(task, entry).finally(() => running.delete(task.id));
      return entry.done;
    },
    /** Stops the task here if it runs here (its cancel is already saved). */
    abort(taskId: string) {
      running.get(taskId)?.stop('cancelled');
    },
    /** Lets running tasks finish for up to `graceMs`, then stops the rest, settling them as failed (their holds returned). */
    async drain(graceMs: number) {
      const all = () => Promise.allSettled([...running.values()].map((r) => r.done));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([all(), new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
      clearTimeout(timer);
      for (const r of running.values()) r.stop('shutdown');
      await all();
    },
    /** Tasks this process is running or holding in its queue (for tests and metrics). */
    count: () => running.size,
  };
}

export type TaskRunner = ReturnType<typeof taskRunner>;
