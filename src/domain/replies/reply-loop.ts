import { agentLlmSettings, agentSuggestions, agentTools } from '../agents/fields.ts';
import { BUDGET_EXCEEDED } from '../core/budgets.ts';
import type { ChatMessage, ChatRequest } from '../core/chat.ts';
import type { MessageView } from '../core/events.ts';
import { INTERRUPTED, ReplyStopped, ROLLED_BACK } from './endings.ts';
import type { ReplyAgent } from './ports.ts';
import type { ReplyJob, ReplyRuntime, Target, Written } from './runtime.ts';
import { CallLimitReached, type CallSink, type StreamedCall, streamCall } from './stream-call.ts';

/** Model calls one reply may make (each is a turn of the budget) before it must answer. */
export const MAX_CALLS_PER_REPLY = 8;

/** What a reply's model calls are asked, before the agent's model, reasoning and tools are added. */
export type ReplyRequest = Omit<ChatRequest, 'agent' | 'model' | 'reasoningEffort' | 'tools'>;

/** The request every model call of this agent's reply starts from (its tools aside), and whether it shows its reasoning. */
function chatRequest(rt: ReplyRuntime, agent: ReplyAgent, thinking: boolean, request: ReplyRequest) {
  const { llm } = rt;
  const settings = agentLlmSettings(agent);
  const thinks = settings.thinkingPolicy === 'always' || (settings.thinkingPolicy !== 'off' && thinking);
  const base: Omit<ChatRequest, 'tools'> = {
    ...request,
    model: (settings.modelProfile && llm.models[settings.modelProfile as keyof typeof llm.models]) || llm.models.default,
    reasoningEffort: thinks ? ((settings.thinkingEffortCap as ChatRequest['reasoningEffort']) ?? 'medium') : null,
    agent: {
      name: agent.name,
      key: agent.user.username,
      description: agent.description,
      greeting: agent.greeting,
      knowledge: agent.knowledge,
      suggestions: agentSuggestions(agent),
    },
  };
  return { base, thinks };
}

/**
 * Where a reply's model calls stream to: each piece goes into the draft and out to the session.
 * The text so far is saved now and then while it streams, so that a process that dies leaves
 * the reply with most of what its watchers saw (start-up recovery marks it failed). At most one
 * save per interval, armed by the first delta after the last one (so a provider that pauses
 * still has its text saved), handed to the writer, which groups it with the others.
 */
function draftSink(rt: ReplyRuntime, job: ReplyJob, target: Target, draft: Written, thinks: boolean) {
  const { sessionId, promptId } = job;
  const { messageId, agentId } = target;
  let checkpointTimer: NodeJS.Timeout | undefined;
  const checkpoint = () => {
    if (checkpointTimer || rt.llm.checkpointMs === 0) return;
    checkpointTimer = setTimeout(() => {
      checkpointTimer = undefined;
      rt.writer.checkpoint({ messageId, content: draft.content, thought: draft.thought });
    }, rt.llm.checkpointMs);
  };
  const sink: CallSink = {
    content(text) {
      draft.content += text;
      checkpoint();
      rt.metrics.streamed('content');
      void rt.emit(sessionId, { type: 'assistant_token', promptId, messageId, agentId, text });
    },
    reasoning: thinks
      ? (text) => {
          draft.thought += text;
          checkpoint();
          rt.metrics.streamed('reasoning');
          void rt.emit(sessionId, { type: 'assistant_thinking', promptId, messageId, agentId, text });
        }
      : undefined,
  };
  return { sink, close: () => clearTimeout(checkpointTimer) };
}

/**
 * Whether model call `call` of a reply may go: the first call's turn was reserved with the
 * prompt; every further call needs its own, within every budget of the session.
 */
async function reserveCall(rt: ReplyRuntime, sessionId: string, call: number, draft: Written) {
  if (call === 0) return;
  const stopped = await rt.store.reserveTurn(sessionId, draft.promptTokens + draft.completionTokens);
  if (stopped) throw new ReplyStopped(BUDGET_EXCEEDED[stopped]);
}

/**
 * A tool round: runs the tools one model call asked for. The reply is saved as it stands and its
 * watchers see it, with the calls it waits for, before they run; the results go back to the model.
 */
async function toolRound(rt: ReplyRuntime, job: ReplyJob, target: Target, content: string, called: StreamedCall, signal: AbortSignal) {
  const { sessionId, promptId } = job;
  const { messageId, agentId } = target;
  const recorded = await rt.tools.record(called.calls, { sessionId, promptId, messageId, agentId, userId: job.userId, signal });
  const message = await rt.store.saveText(messageId, content);
  await rt.emit(sessionId, { type: 'assistant_message', promptId, agentId, message });
  const results = await recorded.run();
  return [
    {
      role: 'assistant' as const,
      content: called.written || null,
      tool_calls: called.calls.map((r) => ({ id: r.id, type: 'function' as const, function: { name: r.name, arguments: r.arguments } })),
    },
    ...results.map((r) => ({ role: 'tool' as const, tool_call_id: r.id, content: r.content })),
  ];
}

/**
 * One agent's reply: model calls streamed to the session (each may ask for tools, whose results
 * feed the next), then saved with its token usage and shown whole (`assistant_message`). A reply
 * that does not complete is ended by `rt.fail`; either way, this resolves (null for no reply).
 */
export async function writeReply(
  rt: ReplyRuntime,
  job: ReplyJob,
  target: Target,
  agent: ReplyAgent,
  request: ReplyRequest,
  signal: AbortSignal,
): Promise<MessageView | null> {
  const { sessionId, promptId } = job;
  const { messageId, agentId } = target;
  const { base, thinks } = chatRequest(rt, agent, job.thinking, request);
  const limits = { maxCompletionTokens: rt.llm.maxCompletionTokens, maxCallMs: rt.llm.maxCallMs };
  const messages: ChatMessage[] = [...request.messages];
  const draft: Written = { content: '', thought: '', promptTokens: 0, completionTokens: 0 };
  const { sink, close } = draftSink(rt, job, target, draft, thinks);
  const ended = rt.metrics.started();
  try {
    // Inside: a tool source that fails (the database out of reach) fails the reply, which ends.
    const tools = await rt.tools.offer(agent.id, agentTools(agent), Boolean(agent.mcpTools));
    for (let call = 0; ; call++) {
      signal.throwIfAborted();
      await reserveCall(rt, sessionId, call, draft);
      const called = await streamCall(rt.provider, { ...base, tools, messages }, signal, sink, limits, call);
      draft.promptTokens += called.usage.prompt;
      draft.completionTokens += called.usage.completion;
      if (called.calls.length === 0) break;
      if (call + 1 >= MAX_CALLS_PER_REPLY)
        throw new ReplyStopped(`The reply used its ${MAX_CALLS_PER_REPLY} model calls without finishing`);
      messages.push(...(await toolRound(rt, job, target, draft.content, called, signal)));
    }
    const message = await rt.writer.complete({ sessionId, messageId, ...draft });
    if (!message) {
      // A newer prompt asked it to stop and the signal did not reach it in time: it ends as asked.
      // Otherwise its session was deleted, or recovery closed it and told its watchers.
      const stop = await rt.store.stopRequested(messageId);
      if (stop) await rt.fail(job, target, stop === 'interrupt' ? INTERRUPTED : ROLLED_BACK, draft);
      return null;
    }
    rt.metrics.usage(draft.promptTokens, draft.completionTokens);
    await rt.emit(sessionId, { type: 'assistant_message', promptId, agentId, message });
    return message;
  } catch (e) {
    if (e instanceof CallLimitReached) {
      draft.promptTokens += e.usage.prompt;
      draft.completionTokens += e.usage.completion;
    }
    await rt.fail(job, target, signal.aborted ? signal.reason : e, draft);
    return null;
  } finally {
    close();
    ended();
  }
}
