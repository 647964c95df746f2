import { canReadAgent } from '../agents/service.ts';
import { BUDGET_EXCEEDED, type Budget } from '../core/budgets.ts';
import type { EventBus } from '../core/bus.ts';
import { badInput } from '../core/errors.ts';
import type { AutonomyStopReason } from '../core/events.ts';
import type { Job, JobQueue } from '../core/jobs.ts';
import { DATABASE_LOST, SHUT_DOWN } from '../replies/endings.ts';
import type { ReplyEngine } from '../replies/engine.ts';
import type { AutonomySettings } from '../sessions/inputs.ts';
import type { SessionAgent } from '../sessions/store.ts';
import type { AutonomyState, AutonomyStore } from './store.ts';

/** The original's text, for a session asked to reply on its own with nothing to bound it. */
export const AUTO_REPLY_NEEDS_BUDGET = 'Session cannot have auto-reply enabled without a set budget';

/** The queue of autonomous turns: one job per session waits or runs (`docs/autonomy.md`). */
export const TURN_QUEUE = 'autonomous-turn';
/** Turn jobs the queue gave up on (out of tries, however the last ended): each stops its loop. */
export const GIVEN_UP_QUEUE = 'autonomous-turn-given-up';
/** Turns one instance writes at once; more wait in the queue (the reply engine bounds their tools and streams besides). */
const TURNS_PER_INSTANCE = 4;
/** Tries of a turn job after its first: a turn cut off (a shutdown, the database lost) goes on from the session as it is. */
const TURN_RETRIES = 5;
/** How long a session with a reply under way waits before it looks again, at least. */
const BUSY_RECHECK_S = 1;

const STOP_TEXT: Record<AutonomyStopReason, string> = {
  turn_budget: BUDGET_EXCEEDED.turns,
  token_budget: BUDGET_EXCEEDED.tokens,
  manna_budget: BUDGET_EXCEEDED.manna,
  turned_off: 'Auto-reply was turned off',
  no_agent: 'No agent of this session can reply any more (removed, or made private by its owner)',
  reply_failed: 'A turn failed',
};
const budgetStop: Record<Budget, AutonomyStopReason> = { turns: 'turn_budget', tokens: 'token_budget', manna: 'manna_budget' };

/**
 * Why a failed turn stops the loop: a reply refused a model call by a budget (a tool's charge
 * spent the last of the manna, say) stops it for that budget, any other failure as a failed turn.
 */
function failedStop(error: string | null): AutonomyStopReason {
  const budget = (Object.keys(BUDGET_EXCEEDED) as Budget[]).find((b) => BUDGET_EXCEEDED[b] === error);
  return budget ? budgetStop[budget] : 'reply_failed';
}

/** What an autonomous session does next, as decided from its state. */
export type Step =
  /** Auto-reply is off (or was never set): nothing. */
  | { kind: 'off' }
  | { kind: 'stop'; reason: AutonomyStopReason }
  /** Look again at `until`: a reply is under way, or the interval since the last one has not passed. */
  | { kind: 'wait'; until: Date }
  | { kind: 'turn'; agentId: string };

/** The budget that is spent, as the turn reservation counts it (`manna/stores/session-budgets.ts`). */
export function spentBudget({ budget, spent }: Pick<AutonomyState, 'budget' | 'spent'>): Budget | null {
  if (budget.turns !== null && spent.turns >= budget.turns) return 'turns';
  if (budget.tokens !== null && spent.tokens >= budget.tokens) return 'tokens';
  if (budget.manna !== null && spent.manna >= budget.manna) return 'manna';
  return null;
}

/**
 * The next speaker: any of `agents` at random, or with `random_exclude_last` any but the one
 * that spoke last (unless it is the only one). `random` returns a number in [0, 1).
 */
export function chooseActor(
  agents: Pick<SessionAgent, 'id'>[],
  method: AutonomyState['actorSelection'],
  lastSpeakerId: string | null,
  random: () => number,
): string | null {
  const others = method === 'random_exclude_last' ? agents.filter((a) => a.id !== lastSpeakerId) : agents;
  const pool = others.length ? others : agents;
  if (!pool.length) return null;
  return pool[Math.min(pool.length - 1, Math.floor(random() * pool.length))]!.id;
}

/** The autonomy rules' decision: who speaks next and when, or why the loop stops. */
export function nextStep(state: AutonomyState, now: Date, random: () => number): Step {
  if (!state.autoReply) return { kind: 'off' };
  const spent = spentBudget(state);
  if (spent) return { kind: 'stop', reason: budgetStop[spent] };
  // An agent its owner made private since answers no one who may no longer use it.
  const usable = state.agents.filter((a) => canReadAgent({ id: state.ownerId }, a));
  if (!usable.length) return { kind: 'stop', reason: 'no_agent' };
  const intervalMs = state.replyInterval * 1000;
  if (state.replying) return { kind: 'wait', until: new Date(now.getTime() + Math.max(intervalMs, BUSY_RECHECK_S * 1000)) };
  const due = state.lastActivityAt ? state.lastActivityAt.getTime() + intervalMs : now.getTime();
  if (due > now.getTime()) return { kind: 'wait', until: new Date(due) };
  return { kind: 'turn', agentId: chooseActor(usable, state.actorSelection, state.lastSpeakerId, random)! };
}

export interface AutonomyDependencies {
  store: AutonomyStore;
  bus: Pick<EventBus, 'publish'>;
  jobs: JobQueue;
  replies: Pick<ReplyEngine, 'instanceId' | 'start'>;
  log: { error(obj: unknown, msg?: string): void };
  random?: () => number;
  now?: () => Date;
}

/**
 * Autonomous sessions: while auto-reply is on, one turn job per session waits or runs (the
 * queue's key is the session). A turn job decides from the session as it is then (`nextStep`):
 * it takes the turn (one agent's reply to the conversation so far) and sends the next job, or
 * waits by sending itself for later, or stops the loop and says why. A person's message in
 * between needs nothing: the waiting job sees it and its replies when it runs.
 */
export function autonomyRules({ store, bus, jobs, replies, log, random = Math.random, now = () => new Date() }: AutonomyDependencies) {
  const schedule = (sessionId: string, at?: Date) => jobs.send(TURN_QUEUE, { sessionId }, { key: sessionId, at });

  /**
   * Sends the turn job for `at` from a turn job's decision. The owner may have turned the loop
   * off since that decision's state was read, and dropped the waiting turn before this one was
   * sent: then this one is taken back, or it would wait out its time for nothing.
   */
  async function scheduleWhileOn(sessionId: string, at: Date) {
    await schedule(sessionId, at);
    if (!(await store.standing(sessionId))?.autoReply) await jobs.cancelWaiting(TURN_QUEUE, sessionId);
  }

  /** Ends the loop once: turns auto-reply off, drops the waiting turn, tells the watchers why. */
  async function stop(sessionId: string, reason: AutonomyStopReason) {
    if (!(await store.turnOff(sessionId, reason, STOP_TEXT[reason]))) return false;
    await jobs.cancelWaiting(TURN_QUEUE, sessionId);
    await bus.publish(sessionId, { type: 'autonomy_stopped', reason, detail: STOP_TEXT[reason] });
    return true;
  }

  /** Carries out a decision that takes no turn. */
  async function settle(sessionId: string, next: Exclude<Step, { kind: 'turn' }>) {
    if (next.kind === 'stop') await stop(sessionId, next.reason);
    else if (next.kind === 'wait') await scheduleWhileOn(sessionId, next.until);
  }

  /** One agent's turn: its reply to the conversation so far, written to the end; false when it did not start. */
  async function takeTurn(sessionId: string, ownerId: string, agentId: string, signal: AbortSignal): Promise<boolean> {
    const start = await store.startTurn(sessionId, agentId, replies.instanceId);
    if ('stopped' in start) {
      await stop(sessionId, budgetStop[start.stopped]);
      return false;
    }
    if ('busy' in start) {
      await scheduleWhileOn(sessionId, new Date(now().getTime() + BUSY_RECHECK_S * 1000));
      return false;
    }
    const target = start.started;
    await bus.publish(sessionId, { type: 'autonomous_turn', promptId: target.messageId, agentId, replyId: target.messageId });
    await replies.start({
      sessionId,
      promptId: target.messageId,
      // The session's owner set the loop going: the turns are theirs, and paid as their replies are.
      userId: ownerId,
      replies: [target],
      thinking: false,
      // No person's message to remember anything from.
      excludeMemory: true,
      generateTitle: false,
    });
    const outcome = await store.replyOutcome(target.messageId);
    // Cut off by this instance's shutdown or by the database: the job fails and is tried again
    // (on another instance, or here after a restart), and goes on from the session as it is then.
    if (signal.aborted || outcome?.error === SHUT_DOWN || outcome?.error === DATABASE_LOST)
      throw new Error(`the turn in session ${sessionId} was cut off`);
    if (outcome?.status === 'failed') await stop(sessionId, failedStop(outcome.error));
    return true;
  }

  /**
   * A turn job: takes the turn that is due, then sends the job of the next (a job of its own,
   * so that each turn is claimed, and survives a restart, on its own), or stops the loop.
   */
  async function runTurn(job: Job<{ sessionId: string }>) {
    const { sessionId } = job.data;
    const state = await store.state(sessionId);
    if (!state) return;
    const next = nextStep(state, now(), random);
    if (next.kind !== 'turn') return settle(sessionId, next);
    if (!(await takeTurn(sessionId, state.ownerId, next.agentId, job.signal))) return;
    const after = await store.state(sessionId);
    if (!after) return;
    const then = nextStep(after, now(), random);
    await settle(sessionId, then.kind === 'turn' ? { kind: 'wait', until: now() } : then);
  }

  return {
    /** Declares the turn queues and works them on this instance. */
    async startWork() {
      await jobs.declare({ name: GIVEN_UP_QUEUE, retries: 5, retryDelaySeconds: 2, runSeconds: 60 });
      await jobs.declare({
        name: TURN_QUEUE,
        oneAtATimePerKey: true,
        retries: TURN_RETRIES,
        retryDelaySeconds: 2,
        runSeconds: 60 * 60,
        givenUpTo: GIVEN_UP_QUEUE,
      });
      await jobs.work<{ sessionId: string }>(TURN_QUEUE, { concurrency: TURNS_PER_INSTANCE }, (job) =>
        runTurn(job).catch((err) => {
          log.error({ err, sessionId: job.data.sessionId }, 'an autonomous turn failed');
          throw err;
        }),
      );
      // The queue gave up on a turn (its last try threw, or its instance died during it): left on,
      // the loop would wait for a turn that never comes, and its watchers would never learn why.
      await jobs.work<{ sessionId: string }>(GIVEN_UP_QUEUE, { concurrency: 1 }, async (job) => {
        await stop(job.data.sessionId, 'reply_failed');
      });
    },

    /**
     * Whether a change of `sessionId` (none: a new session) may set these autonomy settings with
     * these budgets: auto-reply needs a budget, the session's or one the change sets. Returns
     * whether auto-reply was on before the change.
     */
    async check(sessionId: string | undefined, settings: AutonomySettings | undefined, setsBudget: boolean): Promise<boolean> {
      if (!settings) return false;
      const standing = sessionId ? await store.standing(sessionId) : null;
      if (settings.autoReply && !setsBudget && !standing?.budgeted) throw badInput(AUTO_REPLY_NEEDS_BUDGET);
      return standing?.autoReply ?? false;
    },

    /** After a change of the settings is saved: starts the loop, or stops it (`wasOn`: before the change). */
    async changed(sessionId: string, settings: AutonomySettings, wasOn: boolean) {
      if (settings.autoReply) {
        // A turn waiting for the old interval would keep its time: it is sent again, to decide
        // from the new settings when it runs (and wait again if its time has not come).
        if (wasOn) await jobs.cancelWaiting(TURN_QUEUE, sessionId);
        await schedule(sessionId);
      } else if (wasOn) {
        await jobs.cancelWaiting(TURN_QUEUE, sessionId);
        await bus.publish(sessionId, { type: 'autonomy_stopped', reason: 'turned_off', detail: STOP_TEXT.turned_off });
      }
    },

    /** Stops the loop (a cancel of everything in the session); whether it was running. */
    turnOff: (sessionId: string) => stop(sessionId, 'turned_off'),
  };
}

export type AutonomyRules = ReturnType<typeof autonomyRules>;
