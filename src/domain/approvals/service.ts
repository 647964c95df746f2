import type { EventBus } from '../core/bus.ts';
import { conflict, forbidden, notFound } from '../core/errors.ts';
import type { ToolCallView } from '../core/events.ts';
import { canNameARow } from '../core/ids.ts';
import type { JobQueue } from '../core/jobs.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import type { ApprovalDeadline, ApprovalTimers } from '../replies/runtime.ts';
import type { ApprovalAnswer, ApprovalRow } from '../tasks/index.ts';
import { type SettleApprovalInput, settleApprovalSchema } from './inputs.ts';

/** Each call's timeout: a delayed job that denies the call if it still waits then. */
export const APPROVAL_EXPIRY_QUEUE = 'tool-approval-expiry';
/** A paused reply whose calls were all answered: whichever instance takes the job goes on with it. */
export const REPLY_RESUME_QUEUE = 'reply-resume';
/** Paused replies one instance takes at once (each then runs in the background as any reply). */
const RESUMES_PER_INSTANCE = 4;

export const APPROVAL_NOT_FOUND = 'No tool call awaiting approval with that id in this session';
export const NOT_THE_PAYER = 'Only the user who pays for this reply can approve or deny its tool calls';

/** The statements approvals need (`tasks/approval-store.ts`). */
export interface ApprovalStore {
  find(sessionId: string, id: string): Promise<ApprovalRow | null>;
  answer(id: string, answer: ApprovalAnswer): Promise<ToolCallView | null>;
}

interface ExpiryJob {
  taskId: string;
  sessionId: string;
  messageId: string;
  timeoutSeconds: number;
}

/** "no answer in 10 minutes", as the model and the user read it. */
const noAnswerIn = (seconds: number) =>
  seconds % 60 === 0 ? `No answer in ${seconds / 60} minute${seconds === 60 ? '' : 's'}` : `No answer in ${seconds} seconds`;

const deniedText = (reason: string | undefined) =>
  reason ? `Denied by the user who pays for it: ${reason}` : 'Denied by the user who pays for it';

/**
 * Tool calls that wait for approval (`docs/sessions.md`, "Tool calls that wait for approval").
 * Only the call's payer answers, once: approved, the call goes back to `pending` and runs when
 * its reply goes on (charged then, as any call); denied, or unanswered when its timeout job
 * comes, it fails with why, nothing charged. Once no call of the reply waits, a job on the queue
 * hands the reply to whichever instance takes it. Timeouts and go-ons are jobs, so a pending
 * approval outlives the process that asked for it.
 */
export function approvalRules(deps: {
  store: ApprovalStore;
  /** The caller's place in a session (`sessions.permissionIn`): NOT_FOUND when there is no such session. */
  permissionIn(viewer: Viewer, sessionId: string): Promise<string | null>;
  bus: EventBus;
  jobs: JobQueue;
  log: { error(obj: unknown, msg?: string): void };
}) {
  const { store, bus, jobs, log } = deps;

  const goOn = (messageId: string) => jobs.send(REPLY_RESUME_QUEUE, { messageId }, { key: messageId });

  /**
   * An answer is told to the session's watchers at once, whoever gave it and wherever; a denial
   * (or a timeout) is the call's end too, told to them and to its payer's feed.
   */
  async function announce(row: ApprovalRow, toolCall: ToolCallView) {
    const ofReply =
      row.promptId && row.agentId ? { promptId: row.promptId, messageId: row.messageId, agentId: row.agentId, toolCall } : null;
    if (ofReply)
      await bus
        .publish(row.sessionId, { type: 'tool_approval_settled', ...ofReply })
        .catch((err) => log.error({ err }, 'could not publish an answered tool call'));
    if (toolCall.approval === 'approved') return;
    if (ofReply)
      await bus
        .publish(row.sessionId, { type: 'tool_complete', ...ofReply })
        .catch((err) => log.error({ err }, 'could not publish a denied tool call'));
    await bus.feeds
      .publish(row.userId, { type: 'task_failed', taskId: row.id, error: toolCall.error ?? 'Denied' })
      .catch((err) => log.error({ err }, 'could not publish a denied tool call'));
  }

  /**
   * Answers a call that waits for approval: the one front every surface calls (REST, GraphQL,
   * and the Telegram buttons and the playground's card after them). A stranger to the session is
   * told there is no such call (NOT_FOUND); a member who does not pay for it is FORBIDDEN; an
   * answer to a call answered already (or timed out, or ended with its reply) is a CONFLICT.
   * Returns the call as saved.
   */
  async function settle(viewer: Viewer, sessionId: string, callId: string, input: unknown): Promise<ToolCallView> {
    const answer: SettleApprovalInput = parseInput(settleApprovalSchema, input);
    const permission = await deps.permissionIn(viewer, sessionId);
    const row = canNameARow(callId) ? await store.find(sessionId, callId) : null;
    if (!row || row.userId !== viewer.id) {
      if (permission === null) throw notFound(APPROVAL_NOT_FOUND);
      if (!row) throw notFound(APPROVAL_NOT_FOUND);
      throw forbidden(NOT_THE_PAYER);
    }
    if (row.status !== 'awaiting_approval') throw conflict(`This tool call was settled already (${row.approval})`);
    const saved = await store.answer(
      row.id,
      answer.approve ? { approval: 'approved' } : { approval: 'denied', error: deniedText(answer.reason) },
    );
    if (!saved) throw conflict('This tool call was settled already');
    await announce(row, saved);
    await goOn(row.messageId);
    return saved;
  }

  /** A call's timeout came: denied if it still waits; its reply goes on either way (once none of its calls waits). */
  async function expire({ taskId, sessionId, messageId, timeoutSeconds }: ExpiryJob) {
    const row = await store.find(sessionId, taskId);
    if (!row) return;
    if (row.status === 'awaiting_approval') {
      const saved = await store.answer(taskId, { approval: 'expired', error: noAnswerIn(timeoutSeconds) });
      if (saved) await announce(row, saved);
    }
    // Also when it was answered: a process that died between an answer and its job is caught up here.
    await goOn(messageId);
  }

  const timers: ApprovalTimers = {
    async schedule(deadlines: ApprovalDeadline[]) {
      await Promise.all(deadlines.map(({ at, ...job }) => jobs.send(APPROVAL_EXPIRY_QUEUE, job satisfies ExpiryJob, { at })));
    },
  };

  return {
    settle,
    timers,
    /** Declares the queues and works them here: timeouts, and paused replies handed to `resume` (the reply engine's). */
    async startWork(replies: { resume(messageId: string): Promise<boolean> }) {
      await jobs.declare({ name: APPROVAL_EXPIRY_QUEUE, retries: 5, retryDelaySeconds: 2, runSeconds: 60 });
      await jobs.declare({ name: REPLY_RESUME_QUEUE, oneAtATimePerKey: true, retries: 5, retryDelaySeconds: 2, runSeconds: 60 });
      await jobs.work<ExpiryJob>(APPROVAL_EXPIRY_QUEUE, { concurrency: 4 }, (job) => expire(job.data));
      await jobs.work<{ messageId: string }>(REPLY_RESUME_QUEUE, { concurrency: RESUMES_PER_INSTANCE }, async (job) => {
        await replies.resume(job.data.messageId);
      });
    },
  };
}

export type ApprovalRules = ReturnType<typeof approvalRules>;
