import { conflict } from '../core/errors.ts';
import type { Viewer } from '../core/viewer.ts';
import type { Outcome, OutcomeWait, WaitEnd } from '../replies/outcome.ts';
import type { PromptStarted } from '../sessions/index.ts';
import type { TriggerEvents, TriggerJob, TriggerJobs } from './ports.ts';
import { resolveRunning, sweep } from './runner-recovery.ts';
import { type RunnerStatements, runnerStatements } from './runner-statements.ts';
import { nextAfter, queueNext, start } from './run.ts';
import type { Trigger, TriggerStore } from './store.ts';

export { RECHECK_MS } from './runner-recovery.ts';
export { FAILURES_TO_PAUSE } from './run.ts';

export const ALREADY_RUNNING = 'This trigger is already running';

export interface RunnerDependencies {
  store: TriggerStore;
  jobs: TriggerJobs;
  events: TriggerEvents;
  /** Operation 4, as the trigger's owner: the prompt goes in like any other. */
  send(viewer: Viewer, input: unknown): Promise<PromptStarted>;
  /** Follows a prompt's replies until they end (the replies' `awaitOutcome`). */
  awaitOutcome(wait: OutcomeWait): Promise<WaitEnd>;
  /** How a prompt's replies stand now, as saved (the replies' `outcome`); null when the prompt is gone. */
  outcome(promptId: string): Promise<Outcome | null>;
  /** Stops a prompt's replies wherever they run. */
  cancel(sessionId: string, promptId: string): Promise<void>;
  /** `TRIGGER_RUN_TIMEOUT_S`, in milliseconds: a run longer than this is failed and released. */
  runTimeoutMs: number;
  /**
   * `TRIGGER_LATE_GRACE_S`, in milliseconds: how late an occurrence's job may be and still count
   * as late rather than missed (a busy instance, or one taking over a dead one's jobs, is seconds
   * late). Occurrences due longer ago than this, after the one being run, were missed in an
   * outage: they fold into this run.
   */
  lateGraceMs: number;
  /**
   * How long a run may sit claimed without its prompt sent before another instance sends it: the
   * instance that claimed it died between the two (sending takes milliseconds). The queue's own
   * takeover time (`JOBS_TAKEOVER_S`).
   */
  promptLeaseMs: number;
  log: { error(obj: unknown, msg?: string): void };
  now?: () => Date;
}

/** One runner's state beside its dependencies: the clock, and the waits for replies this process has under way (shutting down stops them). */
export interface RunContext extends Omit<RunnerDependencies, 'now' | 'store'> {
  store: TriggerStore & RunnerStatements;
  now: () => Date;
  following: Set<AbortController>;
}

/** Whether `trigger` is still due for the occurrence `scheduledFor` (not changed, paused, run or gone since). */
const dueFor = (trigger: Trigger | null, scheduledFor: Date): trigger is Trigger =>
  trigger?.status === 'active' && trigger.nextRun?.getTime() === scheduledFor.getTime();

/** An occurrence is due: run it once, unless it is stale. */
async function occurrence(ctx: RunContext, triggerId: string, scheduledFor: Date) {
  const trigger = await ctx.store.find(triggerId);
  if (trigger?.status === 'active' && trigger.nextRun?.getTime() !== scheduledFor.getTime()) {
    // Claimed already: perhaps by an instance that died before it queued the next occurrence, and
    // this is its job tried again. The next is queued now (nothing when it is), not at the sweep.
    await queueNext(ctx, trigger);
    return;
  }
  if (!dueFor(trigger, scheduledFor)) return;
  let free = trigger;
  if (trigger.runningRunId) {
    const running = await resolveRunning(ctx, trigger);
    if (!running.free) {
      await ctx.jobs.at(running.until, { kind: 'occurrence', triggerId, scheduledFor: scheduledFor.toISOString() });
      return;
    }
    // Settling the run under way changed the trigger: read it again (an idle one needs no second read).
    const settled = await ctx.store.find(triggerId);
    if (!dueFor(settled, scheduledFor)) return;
    free = settled;
  }
  // Computed from (nearly) now, not from the occurrence: after an outage, one run catches up for
  // all it missed, then the schedule goes on; occurrences only late (within the grace) each run.
  const next = nextAfter(free, new Date(Math.max(ctx.now().getTime() - ctx.lateGraceMs, scheduledFor.getTime())));
  await start(ctx, free, { scheduledFor, next });
}

/**
 * Runs triggers: claims an occurrence (once, across instances: `store.claim`), sends its prompt
 * as the owner's message, follows the reply to its end, and records the outcome with the rules
 * on failures, pauses and the end of a schedule (`run.ts`, a run's steps); picks up what another
 * instance left half done (`runner-recovery.ts`). Every step is safe to repeat on another instance.
 */
export function triggerRunner(deps: RunnerDependencies) {
  const ctx: RunContext = {
    ...deps,
    store: { ...deps.store, ...runnerStatements(deps.store) },
    now: deps.now ?? (() => new Date()),
    following: new Set(),
  };

  return {
    /** A job from the queue. */
    async handle(job: TriggerJob) {
      if (job.kind === 'occurrence') return occurrence(ctx, job.triggerId, new Date(job.scheduledFor));
      const trigger = await ctx.store.find(job.triggerId);
      if (!trigger || trigger.runningRunId !== job.runId) return;
      const running = await resolveRunning(ctx, trigger);
      if (!running.free) await ctx.jobs.at(running.until, job);
    },

    /** Runs a trigger now, by hand; a conflict while a run is under way. The run's id. */
    async runNow(trigger: Trigger) {
      if (trigger.runningRunId && !(await resolveRunning(ctx, trigger)).free) throw conflict(ALREADY_RUNNING);
      const runId = await start(ctx, trigger, null);
      if (!runId) throw conflict(ALREADY_RUNNING);
      return runId;
    },

    nextAfter,
    queueNext: (trigger: Pick<Trigger, 'id' | 'nextRun' | 'queuedFor'>) => queueNext(ctx, trigger),
    now: ctx.now,

    /** Plans what a stopped process left unplanned (`runner-recovery.ts`). */
    sweep: (batch = 500) => sweep(ctx, batch),

    /** Stops following replies (shutting down): their runs are settled by whoever looks next. */
    close() {
      for (const wait of ctx.following) wait.abort();
    },
  };
}

export type TriggerRunner = ReturnType<typeof triggerRunner>;
