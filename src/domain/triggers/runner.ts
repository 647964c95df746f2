import { type BusSubscription, isStreamEnd } from '../core/bus.ts';
import { conflict, isDomainError } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import type { Viewer } from '../core/viewer.ts';
import type { PromptStarted } from '../sessions/prompting.ts';
import { isPaymentRefusal } from '../tools/run-call.ts';
import type { TriggerEvents, TriggerJob, TriggerJobs } from './ports.ts';
import { nextOccurrence } from './schedule.ts';
import type { ReplyOutcome, RunOutcome, Trigger, TriggerRun, TriggerStore } from './store.ts';

/** Failures in a row that pause a trigger (the original's rule). */
export const FAILURES_TO_PAUSE = 2;
/** While an earlier run is still under way, how often a due occurrence looks again. */
export const RECHECK_MS = 2_000;

export const ALREADY_RUNNING = 'This trigger is already running';

const SESSION_PROBLEMS = {
  missing: 'The session this trigger posts into was deleted',
  'not-owner': 'The session this trigger posts into is no longer yours',
  'agent-absent': "The trigger's agent is no longer in the session it posts into",
} as const;

export interface RunnerDependencies {
  store: TriggerStore;
  jobs: TriggerJobs;
  events: TriggerEvents;
  /** Operation 4, as the trigger's owner: the prompt goes in like any other. */
  send(viewer: Viewer, input: unknown): Promise<PromptStarted>;
  /** The session's live events, to see the reply end. */
  subscribe(sessionId: string, after: number): BusSubscription;
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

/** What a reply ended as, for its run: failed with the reason, or completed; null while it is still being written. */
function outcomeOf(replies: ReplyOutcome[]): RunOutcome | null {
  if (!replies.length) return { status: 'failed', error: 'The reply to the prompt is gone (its session was deleted)' };
  for (const reply of replies) {
    if (reply.status === 'streaming') return null;
    if (reply.status === 'failed') return { status: 'failed', error: reply.error ?? 'The reply failed' };
    if (reply.status === 'cancelled') return { status: 'failed', error: 'The reply was cancelled' };
    const unpaid = reply.toolErrors.find(isPaymentRefusal);
    if (unpaid) return { status: 'failed', error: unpaid };
  }
  return { status: 'completed' };
}

const promptText = (t: Trigger) => (t.context ? `${t.prompt}\n\n${t.context}` : t.prompt);

/**
 * Runs triggers: claims an occurrence (once, across instances: `store.claim`), sends its prompt
 * as the owner's message, follows the reply to its end, and records the outcome with the rules
 * on failures, pauses and the end of a schedule. Every step is safe to repeat on another instance.
 */
export function triggerRunner(deps: RunnerDependencies) {
  const { store, jobs, events, log } = deps;
  const now = deps.now ?? (() => new Date());
  /** Replies this process is following, so that shutting down can stop following them. */
  const following = new Set<BusSubscription>();

  /** The next occurrence after `after`, or null (by hand only, or past the end). */
  const nextAfter = (t: Pick<Trigger, 'cron' | 'timezone' | 'startDate' | 'endDate'>, after: Date) =>
    t.cron ? nextOccurrence({ cron: t.cron, timezone: t.timezone, startDate: t.startDate, endDate: t.endDate }, after) : null;

  /** Records how a run ended and tells the owner; a due occurrence waiting on it goes ahead. */
  async function settle(run: Pick<TriggerRun, 'id' | 'triggerId'>, outcome: RunOutcome, ownerId: string, agentId: string) {
    const settled = await store.settle(run.id, outcome, FAILURES_TO_PAUSE);
    if (!settled) return;
    const { trigger } = settled;
    const common = { triggerId: run.triggerId, agentId, runId: run.id };
    if (outcome.status === 'completed')
      await events.publish(ownerId, {
        type: 'trigger_run_completed',
        ...common,
        sessionId: settled.run.sessionId ?? '',
        messageId: settled.run.messageId ?? '',
      });
    else
      await events.publish(ownerId, { type: 'trigger_run_failed', ...common, reason: outcome.error, errorCount: trigger?.errorCount ?? 0 });
    if (settled.paused)
      await events.publish(ownerId, {
        type: 'trigger_paused',
        triggerId: run.triggerId,
        agentId,
        reason: 'failures',
        message: `Paused after ${FAILURES_TO_PAUSE} failed runs in a row; the last: ${outcome.status === 'failed' ? outcome.error : ''}`,
      });
    if (trigger?.status === 'finished') await events.publish(ownerId, { type: 'trigger_finished', triggerId: trigger.id, agentId });
    // An occurrence that came due while this run went on was told to wait: it may go now.
    if (trigger?.status === 'active' && trigger.nextRun && trigger.nextRun <= now())
      await jobs.at(now(), { kind: 'occurrence', triggerId: trigger.id, scheduledFor: trigger.nextRun.toISOString() });
  }

  /**
   * Queues the job of a trigger's next run, once its row says what that is (written first, so
   * the job can never arrive before it), and notes it queued; a process that stops in between
   * leaves the two apart, and `sweep` queues it then.
   */
  async function queueNext(trigger: Pick<Trigger, 'id' | 'nextRun' | 'queuedFor'>) {
    if (!trigger.nextRun || trigger.nextRun.getTime() === trigger.queuedFor?.getTime()) return;
    await jobs.at(trigger.nextRun, { kind: 'occurrence', triggerId: trigger.id, scheduledFor: trigger.nextRun.toISOString() });
    await store.markQueued(trigger.id, trigger.nextRun);
  }

  /** Follows a reply to its end (or the run's time limit), then settles the run from what was saved. */
  async function follow(trigger: Trigger, runId: string, started: PromptStarted, deadline: number) {
    const promptId = started.promptId!;
    const subscription = deps.subscribe(started.sessionId, started.startSeq ?? 0);
    following.add(subscription);
    const timer = setTimeout(() => subscription.close(), Math.max(0, deadline - now().getTime()));
    try {
      for await (const item of subscription) {
        if (isStreamEnd(item) || item.type === 'session_deleted') break;
        if (item.type === 'end_prompt' && item.promptId === promptId) break;
      }
    } finally {
      clearTimeout(timer);
      subscription.close();
      following.delete(subscription);
    }
    const outcome = outcomeOf(await store.replyOutcomes(started.replies.map((r) => r.messageId)));
    // Still being written: the time limit, or this process shutting down; `release` decides later.
    if (outcome) await settle({ id: runId, triggerId: trigger.id }, outcome, trigger.userId, trigger.agentId);
  }

  /** Why the trigger's session no longer takes its prompts, in words, or null when it does (or it makes new ones). */
  async function sessionProblem(trigger: Trigger): Promise<string | null> {
    if (trigger.sessionTarget !== 'existing') return null;
    const fit = trigger.sessionId ? await store.sessionFit(trigger.sessionId, trigger.userId, trigger.agentId) : 'missing';
    return fit === 'fits' ? null : SESSION_PROBLEMS[fit];
  }

  /** Sends a claimed run's prompt into its session; a refusal fails the run with its reason. */
  async function sendPrompt(trigger: Trigger, run: Pick<TriggerRun, 'id' | 'startedAt'>) {
    const fail = (error: string) =>
      settle({ id: run.id, triggerId: trigger.id }, { status: 'failed', error }, trigger.userId, trigger.agentId);
    const problem = await sessionProblem(trigger);
    if (problem) return fail(problem);
    let started: PromptStarted;
    try {
      started = await deps.send(
        { id: trigger.userId },
        trigger.sessionTarget === 'existing'
          ? { sessionId: trigger.sessionId, agentIds: [trigger.agentId], content: promptText(trigger) }
          : { agentIds: [trigger.agentId], content: promptText(trigger), title: trigger.name },
      );
    } catch (e) {
      if (!isDomainError(e)) log.error({ err: e, triggerId: trigger.id }, 'a trigger run could not send its prompt');
      return fail(isDomainError(e) ? e.message : 'The prompt could not be sent');
    }
    await store.linkRun(run.id, started.sessionId, started.replies[0]?.messageId ?? null);
    void follow(trigger, run.id, started, run.startedAt.getTime() + deps.runTimeoutMs).catch((err) =>
      log.error({ err, triggerId: trigger.id }, 'a trigger run could not be followed to its end'),
    );
  }

  /**
   * Claims a run and sends its prompt. The time limit's job is queued before the claim, so a run
   * always has one (it does nothing when the claim fails).
   */
  async function start(trigger: Trigger, scheduled: { scheduledFor: Date; next: Date | null } | null) {
    const runId = newId();
    const at = now();
    await jobs.at(new Date(at.getTime() + deps.runTimeoutMs), { kind: 'release', triggerId: trigger.id, runId });
    const claimed = await store.claim(
      trigger.id,
      scheduled
        ? { runId, at, scheduledFor: scheduled.scheduledFor, next: scheduled.next, status: scheduled.next ? 'active' : 'finished' }
        : { runId, at, scheduledFor: null },
    );
    if (!claimed) return null;
    await queueNext(claimed);
    await events.publish(claimed.userId, {
      type: 'trigger_run_started',
      triggerId: claimed.id,
      agentId: claimed.agentId,
      runId,
      scheduledFor: scheduled ? scheduled.scheduledFor.toISOString() : null,
    });
    await sendPrompt(claimed, { id: runId, startedAt: at });
    return runId;
  }

  /**
   * Deals with the run a trigger has under way, if any: settles it from its saved reply when that
   * ended (its instance may be gone), sends its prompt when the instance that claimed it died
   * before, or fails it past the time limit. Whether the trigger is free now, or when to look again.
   */
  async function resolveRunning(trigger: Trigger): Promise<{ free: true } | { free: false; until: Date }> {
    if (!trigger.runningRunId) return { free: true };
    const run = await store.run(trigger.runningRunId);
    if (!run || run.status !== 'running') return { free: false, until: new Date(now().getTime() + RECHECK_MS) };
    const age = now().getTime() - run.startedAt.getTime();
    if (run.messageId) {
      const outcome = outcomeOf(await store.replyOutcomes([run.messageId]));
      if (outcome) {
        await settle(run, outcome, trigger.userId, trigger.agentId);
        return { free: true };
      }
    } else if (age <= deps.runTimeoutMs && now().getTime() - (trigger.runningSince ?? run.startedAt).getTime() > deps.promptLeaseMs) {
      // Whoever renews the lease first sends the prompt the dead instance did not; or, when it
      // died between sending it and linking it, links the one it sent.
      if (await store.renewLease(trigger.id, run.id, trigger.runningSince, now())) {
        const sent = await store.unlinkedPrompt(run, trigger, promptText(trigger));
        if (sent) await store.linkRun(run.id, sent.sessionId, sent.replyId);
        else await sendPrompt(trigger, run);
      }
      return { free: false, until: new Date(now().getTime() + RECHECK_MS) };
    }
    if (age > deps.runTimeoutMs) {
      const prompt = run.messageId ? await store.promptOf(run.messageId) : null;
      if (run.sessionId && prompt) await deps.cancel(run.sessionId, prompt);
      await settle(
        run,
        { status: 'failed', error: `The run took longer than ${deps.runTimeoutMs / 1000} s and was stopped` },
        trigger.userId,
        trigger.agentId,
      );
      return { free: true };
    }
    return { free: false, until: new Date(Math.min(run.startedAt.getTime() + deps.runTimeoutMs + 1, now().getTime() + RECHECK_MS)) };
  }

  /** An occurrence is due: run it once, unless it is stale (the trigger changed, paused, ran it, or is gone). */
  async function occurrence(triggerId: string, scheduledFor: Date) {
    let trigger = await store.find(triggerId);
    if (!trigger || trigger.status !== 'active' || trigger.nextRun?.getTime() !== scheduledFor.getTime()) return;
    const running = await resolveRunning(trigger);
    if (!running.free) {
      await jobs.at(running.until, { kind: 'occurrence', triggerId, scheduledFor: scheduledFor.toISOString() });
      return;
    }
    trigger = await store.find(triggerId);
    if (!trigger || trigger.status !== 'active' || trigger.nextRun?.getTime() !== scheduledFor.getTime()) return;
    // Computed from (nearly) now, not from the occurrence: after an outage, one run catches up for
    // all it missed, then the schedule goes on; occurrences only late (within the grace) each run.
    const next = nextAfter(trigger, new Date(Math.max(now().getTime() - deps.lateGraceMs, scheduledFor.getTime())));
    await start(trigger, { scheduledFor, next });
  }

  return {
    /** A job from the queue. */
    async handle(job: TriggerJob) {
      if (job.kind === 'occurrence') return occurrence(job.triggerId, new Date(job.scheduledFor));
      const trigger = await store.find(job.triggerId);
      if (!trigger || trigger.runningRunId !== job.runId) return;
      const running = await resolveRunning(trigger);
      if (!running.free) await jobs.at(running.until, job);
    },

    /** Runs a trigger now, by hand; a conflict while a run is under way. The run's id. */
    async runNow(trigger: Trigger) {
      if (trigger.runningRunId && !(await resolveRunning(trigger)).free) throw conflict(ALREADY_RUNNING);
      const runId = await start(trigger, null);
      if (!runId) throw conflict(ALREADY_RUNNING);
      return runId;
    },

    nextAfter,
    queueNext,
    now,

    /**
     * Plans what a stopped process left unplanned: active triggers without a next run (kept from
     * before triggers fired, or loaded as data), and next runs whose job was never queued. Both
     * are read through partial indexes that hold nothing normally: no trigger is scanned.
     */
    async sweep(batch = 500) {
      for (let more = true; more; ) {
        const unplanned = await store.unplanned(batch);
        for (const t of unplanned) {
          const nextRun = nextAfter(t, now());
          const planned = await store.update(t.id, nextRun ? { nextRun } : { status: 'finished' });
          if (planned) await queueNext(planned);
        }
        more = unplanned.length === batch;
      }
      for (let more = true; more; ) {
        const unqueued = await store.unqueued(batch);
        for (const t of unqueued) await queueNext(t);
        more = unqueued.length === batch;
      }
    },

    /** Stops following replies (shutting down): their runs are settled by whoever looks next. */
    close() {
      for (const subscription of following) subscription.close();
    },
  };
}

export type TriggerRunner = ReturnType<typeof triggerRunner>;
