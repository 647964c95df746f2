import type { Metrics } from '../../observability/metrics.ts';
import { ProviderError } from '../core/chat.ts';
import type { MessageView } from '../core/events.ts';
import { isDatabaseUnavailable, isRecordGone } from '../core/stores/prisma-errors.ts';
import type { Outcome, ReplyStore } from './ports.ts';
import type { ReplyJob, ReplyRuntime, Target, Written } from './runtime.ts';
import { CallLimitReached } from './stream-call.ts';

/** A reply stopped by a rule of the service (a budget, the number of model calls), worded for the user. */
export class ReplyStopped extends Error {}

/** Why a reply was stopped from outside, as the abort reason of its signal. */
export const SESSION_GONE = Symbol('session deleted');
export const CANCELLED = Symbol('cancelled');
export const SHUTTING_DOWN = Symbol('shutting down');
/** A newer prompt stopped the reply: kept with what it wrote, or removed. */
export const INTERRUPTED = Symbol('interrupted');
export const ROLLED_BACK = Symbol('rolled back');

export const INTERRUPTED_TEXT = 'Interrupted by a newer prompt';
const ROLLED_BACK_TOOL = 'The reply was rolled back by a newer prompt';

export const DATABASE_LOST = 'The database became unavailable while the reply was being written';
export const SHUT_DOWN = 'The server shut down before the reply was finished';
const UNSETTLED_TOOL = 'The reply ended before the tool call was settled';
/** Retries of a reply that could not be saved because the database was away: from 1 s, doubling, up to 30 s apart. */
const SAVE_RETRY_FIRST_MS = 1_000;
const SAVE_RETRY_MAX_MS = 30_000;

/**
 * How a reply that did not complete is saved and told, by what stopped it. `expected` failures
 * are the provider's, the service's rules, or the database going away; anything else is logged.
 */
export function failureOf(reason: unknown): { status: Exclude<Outcome['status'], 'complete'>; error: string; expected: boolean } {
  if (reason === CANCELLED) return { status: 'cancelled', error: 'The reply was cancelled', expected: true };
  if (reason === INTERRUPTED) return { status: 'interrupted', error: INTERRUPTED_TEXT, expected: true };
  if (reason === SHUTTING_DOWN) return { status: 'failed', error: SHUT_DOWN, expected: true };
  if (reason instanceof ProviderError || reason instanceof ReplyStopped || reason instanceof CallLimitReached)
    return { status: 'failed', error: reason.message, expected: true };
  if (isDatabaseUnavailable(reason)) return { status: 'failed', error: DATABASE_LOST, expected: true };
  return { status: 'failed', error: 'The reply failed unexpectedly', expected: false };
}

/** The message as it would have been saved, for watchers while the database is away. */
const unsavedView = (job: ReplyJob, target: Target, outcome: Outcome): MessageView => ({
  id: target.messageId,
  sessionId: job.sessionId,
  ordinal: target.ordinal,
  role: 'assistant',
  senderId: target.agentId,
  promptId: job.promptId,
  status: outcome.status,
  content: outcome.content,
  attachments: [],
  thought: outcome.thought || null,
  error: outcome.error,
  promptTokens: outcome.promptTokens,
  completionTokens: outcome.completionTokens,
  toolCalls: [],
  reactions: {},
  createdAt: target.createdAt.toISOString(),
});

interface EndingsDeps {
  store: Pick<ReplyStore, 'closeReply' | 'removeReply'>;
  emit: ReplyRuntime['emit'];
  log: { error(obj: unknown, msg?: string): void };
  metrics: Metrics['replies'];
}

/**
 * How replies that did not complete end: saved with what they had and why, and their watchers
 * told with an `error` event. When the database is what failed, they are told at once (with the
 * message as it would be saved) and the save is retried until the database is back.
 */
export function replyEndings({ store, emit, log, metrics }: EndingsDeps) {
  /** Saves waiting for the database to come back; dropped on shutdown (start-up recovery closes those replies). */
  const retries = new Set<NodeJS.Timeout>();

  /**
   * Saves the reply with its tokens counted on the session. It leaves no tool call unsettled: one
   * whose settling failed (the database went away meanwhile) is cancelled and its hold given back.
   */
  async function save(sessionId: string, messageId: string, outcome: Outcome) {
    const saved = await store.closeReply(sessionId, messageId, outcome, UNSETTLED_TOOL);
    metrics.usage(outcome.promptTokens, outcome.completionTokens);
    return saved;
  }

  function saveLater(sessionId: string, messageId: string, outcome: Outcome, waitMs: number) {
    const timer = setTimeout(() => {
      retries.delete(timer);
      save(sessionId, messageId, outcome).catch((e) => {
        if (isDatabaseUnavailable(e)) saveLater(sessionId, messageId, outcome, Math.min(waitMs * 2, SAVE_RETRY_MAX_MS));
        else if (!isRecordGone(e)) log.error({ err: e }, 'a failed reply could not be saved');
      });
    }, waitMs);
    retries.add(timer);
  }

  /** A rolled-back reply goes, and its watchers are told; the tokens it used stay counted. */
  async function remove(job: ReplyJob, target: Target, written: Written) {
    const { sessionId, promptId } = job;
    const { messageId, agentId } = target;
    const tokens = written.promptTokens + written.completionTokens;
    if (await store.removeReply(sessionId, messageId, tokens, ROLLED_BACK_TOOL)) {
      metrics.usage(written.promptTokens, written.completionTokens);
      await emit(sessionId, { type: 'reply_removed', promptId, messageId, agentId });
    }
  }

  async function fail(job: ReplyJob, target: Target, reason: unknown, written: Written) {
    if (reason === SESSION_GONE) return;
    if (reason === ROLLED_BACK)
      return remove(job, target, written).catch((e) => {
        if (!isRecordGone(e)) log.error({ err: e }, 'a rolled-back reply could not be removed');
      });
    const { sessionId, promptId } = job;
    const { messageId, agentId } = target;
    const { status, error, expected } = failureOf(reason);
    if (!expected) log.error({ err: reason }, 'a reply failed');
    const outcome: Outcome = { ...written, status, error };
    try {
      const message = await save(sessionId, messageId, outcome);
      await emit(sessionId, { type: 'error', promptId, agentId, error, message });
    } catch (saveError) {
      if (isRecordGone(saveError)) return;
      // Its watchers hear of the end either way: a stream never ends in silence.
      await emit(sessionId, { type: 'error', promptId, agentId, error, message: unsavedView(job, target, outcome) });
      // The database refused the save itself: start-up recovery closes the reply.
      if (!isDatabaseUnavailable(saveError)) return void log.error({ err: saveError }, 'a failed reply could not be saved');
      saveLater(sessionId, messageId, outcome, SAVE_RETRY_FIRST_MS);
    }
  }

  return {
    fail,
    /** Gives up the saves still waiting for the database (on shutdown). */
    dropRetries() {
      for (const timer of retries) clearTimeout(timer);
      retries.clear();
    },
  };
}
