import { conflict } from '../core/errors.ts';
import type { TriggerJob } from './ports.ts';
import { resolveRunning, sweep } from './runner-recovery.ts';
import { runnerStatements } from './runner-statements.ts';
import { nextAfter, queueNext, type RunContext, type RunnerDependencies, start } from './runner-steps.ts';
import type { Trigger } from './store.ts';

export { RECHECK_MS } from './runner-recovery.ts';
export { FAILURES_TO_PAUSE, type RunnerDependencies } from './runner-steps.ts';

export const ALREADY_RUNNING = 'This trigger is already running';

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
 * on failures, pauses and the end of a schedule (`runner-steps.ts`); picks up what another
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
