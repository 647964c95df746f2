import { ReplyStopped, SESSION_GONE } from './endings.ts';
import { HISTORY_LIMIT, remember } from './answer-prompt.ts';
import { continueReply, PAUSED } from './reply-loop.ts';
import { nameSession } from './title.ts';
import type { PausedReply, ReplyJob, ReplyRuntime, Target } from './runtime.ts';

/** A paused reply's job and target, as the rest of the engine takes them. */
export function pausedJob(paused: PausedReply): { job: ReplyJob; target: Target } {
  const target: Target = { ...paused.target, createdAt: new Date(paused.target.createdAt) };
  return { job: { ...paused.job, replies: [target], generateTitle: false }, target };
}

/**
 * `end_prompt` once the last reply to the prompt has ended: the others may have ended while this
 * one waited. True when it was the last.
 */
async function endPromptIfLast(rt: ReplyRuntime, paused: PausedReply) {
  const others = paused.replyIds.filter((id) => id !== paused.target.messageId);
  if (others.length && (await rt.store.stillWriting(others)).length) return false;
  await rt.emit(paused.job.sessionId, { type: 'end_prompt', promptId: paused.job.promptId });
  return true;
}

/**
 * Goes on with a reply taken after its approvals were answered (`claimPaused`): it is read
 * again with its agent as it is now, continued from the model call after the paused round,
 * remembered when it completes, and its prompt ended if it was the last reply to end.
 */
export async function goOn(rt: ReplyRuntime, paused: PausedReply, signal: AbortSignal) {
  const { job, target } = pausedJob(paused);
  let conversation: Awaited<ReturnType<ReplyRuntime['store']['conversation']>>;
  try {
    conversation = await rt.store.conversation(job.sessionId, HISTORY_LIMIT);
  } catch (e) {
    await rt.fail(job, target, e, paused.written);
    return endPromptIfLast(rt, paused);
  }
  if (!conversation) return;
  const agent = conversation.agents.find((a) => a.id === target.agentId);
  if (!agent) {
    await rt.fail(job, target, new ReplyStopped('The agent left the session while the reply waited for approval'), paused.written);
    return endPromptIfLast(rt, paused);
  }
  const saved = await continueReply(rt, job, target, agent, paused, signal);
  if (saved === PAUSED) return;
  if (signal.aborted && signal.reason === SESSION_GONE) return;
  const prompt = conversation.history.find((h) => h.message.id === job.promptId)?.message;
  remember(rt, job, agent.id, prompt, saved);
  if (!(await endPromptIfLast(rt, paused)) || !paused.job.generateTitle || !prompt) return;
  // The session's first exchange ended here, not where the prompt was answered: it is named now.
  await nameSession(rt, job, conversation.scenario, prompt.content, saved?.content, signal);
}

/** Ends a paused reply a cancel or a newer prompt stopped (taken with `claimPausedIn`): saved as asked, its waiting calls cancelled. */
export async function endPaused(rt: ReplyRuntime, paused: PausedReply, reason: symbol) {
  if (reason === SESSION_GONE) return;
  const { job, target } = pausedJob(paused);
  await rt.fail(job, target, reason, paused.written);
  await endPromptIfLast(rt, paused);
}
