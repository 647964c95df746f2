import type { MessageView } from '../core/events.ts';
import { toMessageView } from '../core/stores/message-rows.ts';
import { SESSION_GONE } from './endings.ts';
import type { Conversation, ReplyAgent } from './ports.ts';
import { buildPrompt, type PromptAgent } from './prompt.ts';
import { PAUSED, writeReply } from './reply-loop.ts';
import type { ReplyJob, ReplyRuntime, Target, Written } from './runtime.ts';
import { nameSession } from './title.ts';

/** Stored messages read for a prompt; the context window usually keeps fewer. */
export const HISTORY_LIMIT = 200;

const nothingWritten: Written = { content: '', thought: '', promptTokens: 0, completionTokens: 0 };

const profileOf = (a: ReplyAgent): PromptAgent => ({
  id: a.id,
  key: a.user.username,
  name: a.name,
  description: a.description,
  persona: a.persona,
  greeting: a.greeting,
  knowledge: a.knowledge,
});

/** The conversation the caller already read, as the store would have read it. */
const conversationKnown = (known: NonNullable<ReplyJob['known']>): Conversation => ({
  scenario: known.scenario,
  agents: known.agents,
  history: known.history.map((m) => ({
    message: toMessageView({ ...m, toolCalls: m.toolCalls ?? [], reactions: m.reactions ?? [] }),
    senderName: m.sender?.username ?? null,
  })),
});

/** What every reply to the prompt is written from. */
interface Context {
  scenario: string | null;
  agents: Map<string, ReplyAgent>;
  /** Agents go by their name in the conversation, people by their username. */
  names: Map<string, string>;
  history: MessageView[];
  /** The message being answered, when it is among those read. */
  prompt: MessageView | undefined;
}

/**
 * One agent's answer: what it remembers of the user, the prompt built for it, its reply, and
 * then (for a reply that completed) what it learnt, kept in the background.
 */
async function answerAs(rt: ReplyRuntime, job: ReplyJob, target: Target, context: Context, signal: AbortSignal) {
  const agent = context.agents.get(target.agentId);
  if (!agent) return null;
  let memories: string[];
  try {
    memories = job.excludeMemory ? [] : (job.known?.memories?.get(agent.id) ?? (await rt.memory.recall(agent.id, job.userId)));
  } catch (e) {
    await rt.fail(job, target, e, nothingWritten);
    return null;
  }
  const messages = buildPrompt({
    agent: profileOf(agent),
    scenario: context.scenario,
    otherAgents: [...context.agents.values()].filter((a) => a.id !== agent.id).map((a) => a.name),
    names: context.names,
    history: context.history,
    memory: memories,
    contextTokens: rt.llm.contextTokens,
    maxCompletionTokens: rt.llm.maxCompletionTokens,
  });
  const saved = await writeReply(rt, job, target, agent, { messages, maxTokens: rt.llm.maxCompletionTokens }, signal);
  if (saved !== PAUSED) remember(rt, job, agent.id, context.prompt, saved);
  return saved;
}

/** What a completed reply taught its agent about the user, kept in the background (unless excluded). */
export function remember(
  rt: ReplyRuntime,
  job: Pick<ReplyJob, 'userId' | 'sessionId' | 'excludeMemory'>,
  agentId: string,
  prompt: MessageView | undefined,
  saved: MessageView | null,
) {
  if (!saved || !prompt || job.excludeMemory) return;
  const exchange = { agentId, userId: job.userId, sessionId: job.sessionId, prompt: prompt.content, reply: saved.content };
  rt.track(rt.memory.remember(exchange, rt.housekeeping).catch((err) => rt.log.error({ err }, 'could not update memory')));
}

/**
 * A prompt's replies, one per agent, written at once; then `end_prompt`, and the session's
 * title after its first exchange. When nothing can start (the database went away, say), every
 * reply still ends, and the prompt.
 */
export async function answerPrompt(rt: ReplyRuntime, job: ReplyJob, signal: AbortSignal) {
  let conversation: Conversation | null;
  const endUnstarted = async (reason: unknown) => {
    await Promise.all(job.replies.map((target) => rt.fail(job, target, reason, nothingWritten)));
    if (reason !== SESSION_GONE) await rt.emit(job.sessionId, { type: 'end_prompt', promptId: job.promptId });
  };
  if (job.after?.length)
    try {
      // Answered after the replies under way when it was saved, with what they wrote in its context.
      await rt.ended(job.sessionId, job.after, signal);
    } catch (e) {
      return endUnstarted(signal.aborted ? signal.reason : e);
    }
  if (job.known) conversation = conversationKnown(job.known);
  else
    try {
      conversation = await rt.store.conversation(job.sessionId, HISTORY_LIMIT);
    } catch (e) {
      return endUnstarted(e);
    }
  if (!conversation) return;
  const agents = new Map(conversation.agents.map((a) => [a.id, a]));
  const names = new Map<string, string>(
    conversation.history.flatMap((h) => (h.message.senderId && h.senderName !== null ? [[h.message.senderId, h.senderName] as const] : [])),
  );
  for (const a of agents.values()) names.set(a.id, a.name);
  // A reply answers the conversation up to its prompt: prompts saved after it (waiting their turn) are not yet said.
  const before = Math.min(...job.replies.map((r) => r.ordinal));
  const history = conversation.history.map((h) => h.message).filter((m) => m.ordinal < before);
  const prompt = history.find((m) => m.id === job.promptId);
  const context: Context = { scenario: conversation.scenario, agents, names, history, prompt };

  const results = await Promise.all(job.replies.map((target) => answerAs(rt, job, target, context, signal)));
  if (signal.aborted && signal.reason === SESSION_GONE) return;
  // A reply paused for approvals ends the prompt when it goes on and ends (`resume.ts`).
  if (results.includes(PAUSED)) return;
  await rt.emit(job.sessionId, { type: 'end_prompt', promptId: job.promptId });
  const first = results.find((r): r is MessageView => r !== null && r !== PAUSED);
  if (job.generateTitle && prompt) await nameSession(rt, job, conversation.scenario, prompt.content, first?.content, signal);
}
