import { asRunReads, nextAfter, outcomeOf, promptText, QUEUE_AHEAD_MS, queueNext, sendPrompt, settle } from './run.ts';
import type { RunContext } from './runner.ts';
import type { Trigger, TriggerRun } from './store.ts';

/** While an earlier run is still under way, how often a due occurrence looks again. */
export const RECHECK_MS = 2_000;

/** Whether a trigger is free to run now, or when to look again. */
export type Running = { free: true } | { free: false; until: Date };

const recheck = (ctx: RunContext): Running => ({ free: false, until: new Date(ctx.now().getTime() + RECHECK_MS) });

/**
 * Sends the prompt of a run whose instance died before it did, by whoever renews the lease
 * first; or, when it died between sending it and linking it, links the one it sent.
 */
async function takeOverPrompt(ctx: RunContext, trigger: Trigger, run: TriggerRun) {
  if (!(await ctx.store.renewLease(trigger.id, run.id, trigger.runningSince, ctx.now()))) return;
  const sent = await ctx.store.unlinkedPrompt(run, trigger, promptText(trigger));
  if (sent) await ctx.store.linkRun(run.id, sent.sessionId, sent.replyId);
  else await sendPrompt(ctx, trigger, run);
}

/** Stops a run past its time limit (its reply, if one is being written) and fails it. */
async function failStuck(ctx: RunContext, trigger: Trigger, run: TriggerRun) {
  const prompt = run.messageId ? await ctx.store.promptOf(run.messageId) : null;
  if (run.sessionId && prompt) await ctx.cancel(run.sessionId, prompt);
  await settle(
    ctx,
    run,
    { status: 'failed', error: `The run took longer than ${ctx.runTimeoutMs / 1000} s and was stopped` },
    trigger.userId,
    trigger.agentId,
  );
}

/**
 * Deals with the run a trigger has under way, if any: settles it from its saved reply when that
 * ended (its instance may be gone), sends its prompt when the instance that claimed it died
 * before, or fails it past the time limit. Whether the trigger is free now, or when to look again.
 */
export async function resolveRunning(ctx: RunContext, trigger: Trigger): Promise<Running> {
  if (!trigger.runningRunId) return { free: true };
  const run = await ctx.store.run(trigger.runningRunId);
  if (run?.status !== 'running') return recheck(ctx);
  const age = ctx.now().getTime() - run.startedAt.getTime();
  if (run.messageId) {
    const promptId = await ctx.store.promptOf(run.messageId);
    const saved = promptId ? await ctx.outcome(promptId) : null;
    const outcome = outcomeOf(saved ? saved.replies.map(asRunReads) : []);
    if (outcome) {
      await settle(ctx, run, outcome, trigger.userId, trigger.agentId);
      return { free: true };
    }
  } else if (age <= ctx.runTimeoutMs && ctx.now().getTime() - (trigger.runningSince ?? run.startedAt).getTime() > ctx.promptLeaseMs) {
    await takeOverPrompt(ctx, trigger, run);
    return recheck(ctx);
  }
  if (age > ctx.runTimeoutMs) {
    await failStuck(ctx, trigger, run);
    return { free: true };
  }
  return { free: false, until: new Date(Math.min(run.startedAt.getTime() + ctx.runTimeoutMs + 1, ctx.now().getTime() + RECHECK_MS)) };
}

/**
 * Settles the runs under way that no one follows any more: a run whose reply has ended (closed
 * as failed by the start-up or dead-instance recovery of the process that was writing it, say) is
 * settled from it, one whose prompt its instance never sent is sent, one past the time limit is
 * failed (`resolveRunning`). A run whose reply is still being written, within its time limit,
 * is not even read. Without this, a run by hand whose process died stayed `running` until its
 * time limit's job, `TRIGGER_RUN_TIMEOUT_S` later.
 */
async function settleUnderWay(ctx: RunContext, batch: number) {
  const stuckBefore = new Date(ctx.now().getTime() - ctx.runTimeoutMs);
  for (let after: string | null = null; ; ) {
    const running = await ctx.store.underWay(after, stuckBefore, batch);
    for (const trigger of running) await resolveRunning(ctx, trigger);
    if (running.length < batch) return;
    after = running.at(-1)!.id;
  }
}

/**
 * Plans what a stopped process left unplanned: active triggers without a next run (kept from
 * before triggers fired, or loaded as data), and next runs whose job was never queued; and
 * settles the runs it left under way. All three are read through partial indexes that hold
 * nothing normally: no idle trigger is scanned.
 */
export async function sweep(ctx: RunContext, batch: number) {
  await settleUnderWay(ctx, batch);
  for (let more = true; more; ) {
    const unplanned = await ctx.store.unplanned(batch);
    for (const t of unplanned) {
      const nextRun = nextAfter(t, ctx.now());
      const planned = await ctx.store.update(t.id, nextRun ? { nextRun } : { status: 'finished' });
      if (planned) await queueNext(ctx, planned);
    }
    more = unplanned.length === batch;
  }
  for (let more = true; more; ) {
    const unqueued = await ctx.store.unqueued(new Date(ctx.now().getTime() + QUEUE_AHEAD_MS), batch);
    for (const t of unqueued) await queueNext(ctx, t);
    more = unqueued.length === batch;
  }
}
