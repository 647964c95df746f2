// One run of a trigger, step by step: it starts (the claim), its prompt is sent as the owner's
// message, its replies are followed to their end, and it is settled (the rules on failures,
// pauses and the end of a schedule), with the next occurrence queued. The runner (`runner.ts`)
// starts runs from the queue's jobs and by hand; `runner-recovery.ts` finishes what a stopped
// process left.
import { isDomainError } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import type { Outcome } from '../replies/outcome.ts';
import type { PromptStarted } from '../sessions/index.ts';
import { isPaymentRefusal } from '../tools/run-call.ts';
import type { TriggerEvent } from './ports.ts';
import type { RunContext } from './runner.ts';
import { nextOccurrence } from './schedule.ts';
import type { ReplyOutcome, RunOutcome, Trigger, TriggerRun, TriggerStore } from './store.ts';

/** Failures in a row that pause a trigger (the original's rule). */
export const FAILURES_TO_PAUSE = 2;

/** How often every instance plans what a stopped process left unplanned, and queues what comes near (`runner.sweep`). */
export const SWEEP_MS = 60_000;
/**
 * Only occurrences due within this get their job on the queue; the sweep, which runs more often,
 * queues the others as they come near. The queue's poll walks its waiting jobs in the order they
 * were sent, due or not, so a job per trigger due months ahead made every poll of an idle
 * instance read them all (10,000 triggers cost 1.5–1.8× the CPU of none); and a run of a daily or
 * yearly trigger sends nothing for its next occurrence.
 */
export const QUEUE_AHEAD_MS = 3 * SWEEP_MS;

const SESSION_PROBLEMS = {
  missing: 'The session this trigger posts into was deleted',
  'not-owner': 'The session this trigger posts into is no longer yours',
  'agent-absent': "The trigger's agent is no longer in the session it posts into",
} as const;

/** What a reply ended as, for its run: failed with the reason, or completed; null while it is still being written. */
export function outcomeOf(replies: ReplyOutcome[]): RunOutcome | null {
  if (!replies.length) return { status: 'failed', error: 'The reply to the prompt is gone (its session was deleted)' };
  for (const reply of replies) {
    if (reply.status === 'streaming') return null;
    if (reply.status === 'failed') return { status: 'failed', error: reply.error ?? 'The reply failed' };
    if (reply.status === 'cancelled') return { status: 'failed', error: 'The reply was cancelled' };
    if (reply.status === 'interrupted') return { status: 'failed', error: 'The reply was interrupted by a newer prompt' };
    const unpaid = reply.toolErrors.find(isPaymentRefusal);
    if (unpaid) return { status: 'failed', error: unpaid };
  }
  return { status: 'completed' };
}

export const promptText = (t: Trigger) => (t.context ? `${t.prompt}\n\n${t.context}` : t.prompt);

/** The next occurrence after `after`, or null (by hand only, or past the end). */
export const nextAfter = (t: Pick<Trigger, 'cron' | 'timezone' | 'startDate' | 'endDate'>, after: Date) =>
  t.cron ? nextOccurrence({ cron: t.cron, timezone: t.timezone, startDate: t.startDate, endDate: t.endDate }, after) : null;

type Settled = NonNullable<Awaited<ReturnType<TriggerStore['settle']>>>;

/** What the owner is told of a settled run: how it ended, then whether it paused or finished the trigger. */
function settledEvents(run: Pick<TriggerRun, 'id' | 'triggerId'>, agentId: string, outcome: RunOutcome, settled: Settled): TriggerEvent[] {
  const { trigger } = settled;
  const triggerId = run.triggerId;
  const common = { triggerId, agentId, runId: run.id };
  const events: TriggerEvent[] = [
    outcome.status === 'completed'
      ? { type: 'trigger_run_completed', ...common, sessionId: settled.run.sessionId ?? '', messageId: settled.run.messageId ?? '' }
      : { type: 'trigger_run_failed', ...common, reason: outcome.error, errorCount: trigger?.errorCount ?? 0 },
  ];
  if (settled.paused)
    events.push({
      type: 'trigger_paused',
      triggerId,
      agentId,
      reason: 'failures',
      message: `Paused after ${FAILURES_TO_PAUSE} failed runs in a row; the last: ${outcome.status === 'failed' ? outcome.error : ''}`,
    });
  if (trigger?.status === 'finished') events.push({ type: 'trigger_finished', triggerId: trigger.id, agentId });
  return events;
}

/** Records how a run ended and tells the owner; a due occurrence waiting on it goes ahead. */
export async function settle(
  ctx: RunContext,
  run: Pick<TriggerRun, 'id' | 'triggerId'>,
  outcome: RunOutcome,
  ownerId: string,
  agentId: string,
) {
  const settled = await ctx.store.settle(run.id, outcome, FAILURES_TO_PAUSE);
  if (!settled) return;
  for (const event of settledEvents(run, agentId, outcome, settled)) await ctx.events.publish(ownerId, event);
  const { trigger } = settled;
  // An occurrence that came due while this run went on was told to wait: it may go now.
  if (trigger?.status === 'active' && trigger.nextRun && trigger.nextRun <= ctx.now())
    await ctx.jobs.at(ctx.now(), { kind: 'occurrence', triggerId: trigger.id, scheduledFor: trigger.nextRun.toISOString() });
}

/**
 * Queues the job of a trigger's next run when it is due within `QUEUE_AHEAD_MS`, once its row
 * says what that is (written first, so the job can never arrive before it), and notes it queued;
 * a later one, or one a process that stopped in between left unqueued, `sweep` queues when it
 * comes near.
 */
export async function queueNext(ctx: Pick<RunContext, 'store' | 'jobs' | 'now'>, trigger: Pick<Trigger, 'id' | 'nextRun' | 'queuedFor'>) {
  if (!trigger.nextRun || trigger.nextRun.getTime() === trigger.queuedFor?.getTime()) return;
  if (trigger.nextRun.getTime() > ctx.now().getTime() + QUEUE_AHEAD_MS) return;
  await ctx.jobs.at(trigger.nextRun, { kind: 'occurrence', triggerId: trigger.id, scheduledFor: trigger.nextRun.toISOString() });
  await ctx.store.markQueued(trigger.id, trigger.nextRun);
}

/** A reply as a run reads its outcome. */
export const asRunReads = (reply: Outcome['replies'][number]): ReplyOutcome => ({
  status: reply.status,
  error: reply.error,
  toolErrors: reply.toolCalls.flatMap((c) => (c.error ? [c.error] : [])),
});

/**
 * Follows a prompt's replies to their end, its session's deletion, or the run's time limit,
 * then settles the run from what was saved.
 */
async function follow(ctx: RunContext, trigger: Trigger, runId: string, started: PromptStarted, deadline: number) {
  const stop = new AbortController();
  ctx.following.add(stop);
  const timer = setTimeout(() => stop.abort(), Math.max(0, deadline - ctx.now().getTime()));
  try {
    const ended = await ctx.awaitOutcome({
      sessionId: started.sessionId,
      promptId: started.promptId!,
      after: started.startSeq ?? 0,
      signal: stop.signal,
    });
    // Still being written: the time limit, or this process shutting down; `release` decides later.
    if (ended === 'stopped') return;
    const outcome = outcomeOf(ended === 'gone' ? [] : ended.replies.map(asRunReads));
    if (outcome) await settle(ctx, { id: runId, triggerId: trigger.id }, outcome, trigger.userId, trigger.agentId);
  } finally {
    clearTimeout(timer);
    ctx.following.delete(stop);
  }
}

/** Why the trigger's session no longer takes its prompts, in words, or null when it does (or it makes new ones). */
async function sessionProblem(store: TriggerStore, trigger: Trigger): Promise<string | null> {
  if (trigger.sessionTarget !== 'existing') return null;
  const fit = trigger.sessionId ? await store.sessionFit(trigger.sessionId, trigger.userId, trigger.agentId) : 'missing';
  return fit === 'fits' ? null : SESSION_PROBLEMS[fit];
}

/** Sends a claimed run's prompt into its session; a refusal fails the run with its reason. */
export async function sendPrompt(ctx: RunContext, trigger: Trigger, run: Pick<TriggerRun, 'id' | 'startedAt'>) {
  const fail = (error: string) =>
    settle(ctx, { id: run.id, triggerId: trigger.id }, { status: 'failed', error }, trigger.userId, trigger.agentId);
  const problem = await sessionProblem(ctx.store, trigger);
  if (problem) return fail(problem);
  let started: PromptStarted;
  try {
    started = await ctx.send(
      { id: trigger.userId },
      trigger.sessionTarget === 'existing'
        ? { sessionId: trigger.sessionId, agentIds: [trigger.agentId], content: promptText(trigger) }
        : { agentIds: [trigger.agentId], content: promptText(trigger), title: trigger.name },
    );
  } catch (e) {
    if (!isDomainError(e)) ctx.log.error({ err: e, triggerId: trigger.id }, 'a trigger run could not send its prompt');
    return fail(isDomainError(e) ? e.message : 'The prompt could not be sent');
  }
  await ctx.store.linkRun(run.id, started.sessionId, started.replies[0]?.messageId ?? null);
  void follow(ctx, trigger, run.id, started, run.startedAt.getTime() + ctx.runTimeoutMs).catch((err) =>
    ctx.log.error({ err, triggerId: trigger.id }, 'a trigger run could not be followed to its end'),
  );
}

/**
 * Claims a run and sends its prompt. The time limit's job is queued before the claim, so a run
 * always has one (it does nothing when the claim fails). The run's id, or null when another
 * claim came first.
 */
export async function start(ctx: RunContext, trigger: Trigger, scheduled: { scheduledFor: Date; next: Date | null } | null) {
  const runId = newId();
  const at = ctx.now();
  await ctx.jobs.at(new Date(at.getTime() + ctx.runTimeoutMs), { kind: 'release', triggerId: trigger.id, runId });
  const claimed = await ctx.store.claimRun(
    trigger.id,
    scheduled
      ? { runId, at, scheduledFor: scheduled.scheduledFor, next: scheduled.next, status: scheduled.next ? 'active' : 'finished' }
      : { runId, at, scheduledFor: null },
  );
  if (!claimed) return null;
  await queueNext(ctx, claimed);
  await ctx.events.publish(claimed.userId, {
    type: 'trigger_run_started',
    triggerId: claimed.id,
    agentId: claimed.agentId,
    runId,
    scheduledFor: scheduled ? scheduled.scheduledFor.toISOString() : null,
  });
  await sendPrompt(ctx, claimed, { id: runId, startedAt: at });
  return runId;
}
