import type { AwaitingCall } from '../core/tool-host.ts';
import { INTERRUPTED, ROLLED_BACK } from './endings.ts';
import type { PausedReply, ReplyJob, ReplyRuntime, Target } from './runtime.ts';

/** What a paused reply keeps beside its job, its target and the calls that wait. */
type RoundState = Omit<PausedReply, 'job' | 'target' | 'replyIds' | 'waiting'>;

/**
 * Pauses a reply at calls that wait for approval. Each call's timeout is set first (a delayed
 * job), so that none can wait for ever; then what the reply needs to go on is saved on its
 * message, and from then on nothing here holds it: no connection, no timer, no stream slot. Its
 * watchers see the reply with the calls waiting (`assistant_message`, then
 * `tool_approval_requested` per call), and each payer's feed is told. False when the reply could
 * not pause: a newer prompt stopped it meanwhile (it ends as asked), or it is gone.
 */
export async function pauseReply(rt: ReplyRuntime, job: ReplyJob, target: Target, state: RoundState, awaiting: AwaitingCall[]) {
  const { sessionId, promptId } = job;
  const { messageId, agentId } = target;
  const now = Date.now();
  const deadlines = awaiting.map((a) => ({
    taskId: a.toolCall.id,
    sessionId,
    messageId,
    at: new Date(now + a.timeoutSeconds * 1000),
    timeoutSeconds: a.timeoutSeconds,
  }));
  await rt.approvals.schedule(deadlines);
  const paused: PausedReply = {
    ...state,
    job: {
      sessionId,
      promptId,
      userId: job.userId,
      thinking: job.thinking,
      excludeMemory: job.excludeMemory,
      generateTitle: job.generateTitle,
    },
    target: { ...target, createdAt: target.createdAt.toISOString() },
    replyIds: job.replies.map((r) => r.messageId),
    waiting: awaiting.map((a) => ({ call: a.call, taskId: a.toolCall.id, position: a.position })),
  };
  const message = await rt.store.pause(messageId, state.written.content, paused);
  if (!message) {
    const stop = await rt.store.stopRequested(messageId);
    if (stop) await rt.fail(job, target, stop === 'interrupt' ? INTERRUPTED : ROLLED_BACK, state.written);
    return false;
  }
  await rt.emit(sessionId, { type: 'assistant_message', promptId, agentId, message });
  for (const [i, a] of awaiting.entries()) {
    const toolCall = message.toolCalls.find((c) => c.id === a.toolCall.id) ?? a.toolCall;
    const expiresAt = deadlines[i]!.at.toISOString();
    await rt.emit(sessionId, { type: 'tool_approval_requested', promptId, messageId, agentId, toolCall, expiresAt });
    await rt.tell(a.payer, {
      type: 'tool_approval_requested',
      taskId: toolCall.id,
      sessionId,
      messageId,
      agentId,
      tool: toolCall.tool,
      args: toolCall.args as never,
      cost: toolCall.cost ?? 0,
      expiresAt,
    });
  }
  return true;
}
