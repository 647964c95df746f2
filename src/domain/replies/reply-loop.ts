import { agentLlmSettings, agentSuggestions, agentTools } from '../agents/fields.ts';
import { BUDGET_EXCEEDED } from '../core/budgets.ts';
import type { ChatMessage, ChatRequest } from '../core/chat.ts';
import type { MessageView } from '../core/events.ts';
import { INTERRUPTED, ReplyStopped, ROLLED_BACK } from './endings.ts';
import type { ReplyAgent } from './ports.ts';
import type { RoundResults, ToolResult } from '../core/tool-host.ts';
import { pauseReply } from './pause.ts';
import type { PausedReply, ReplyJob, ReplyRuntime, Target, Written } from './runtime.ts';
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

/** The assistant message asking for a round's tools, as the model is shown it again. */
const askingFor = (called: StreamedCall): ChatMessage => ({
  role: 'assistant',
  content: called.written || null,
  tool_calls: called.calls.map((r) => ({ id: r.id, type: 'function', function: { name: r.name, arguments: r.arguments } })),
});

/** A round's results as `tool` messages, in the order the model asked for the calls. */
export const toolMessages = (order: string[], results: ToolResult[]): ChatMessage[] => {
  const byId = new Map(results.map((r) => [r.id, r]));
  return order.flatMap((id) => {
    const r = byId.get(id);
    return r ? [{ role: 'tool' as const, tool_call_id: r.id, content: r.content }] : [];
  });
};

/**
 * A tool round: runs the tools one model call asked for. The reply is saved as it stands and its
 * watchers see it, with the calls it waits for, before they run; the results go back to the
 * model. When some calls must wait for approval, the reply pauses instead (`pause.ts`).
 */
async function toolRound(
  rt: ReplyRuntime,
  job: ReplyJob,
  target: Target,
  loop: LoopState,
  called: StreamedCall,
  signal: AbortSignal,
): Promise<{ messages: ChatMessage[] } | { paused: { asking: ChatMessage; order: string[]; round: RoundResults } }> {
  const { sessionId, promptId } = job;
  const { messageId, agentId } = target;
  const recorded = await rt.tools.record(called.calls, { sessionId, promptId, messageId, agentId, userId: job.userId, signal });
  const message = await rt.store.saveText(messageId, loop.draft.content);
  await rt.emit(sessionId, { type: 'assistant_message', promptId, agentId, message });
  const round = await recorded.run();
  const order = called.calls.map((c) => c.id);
  const asking = askingFor(called);
  if (round.awaiting.length === 0) return { messages: [asking, ...toolMessages(order, round.results)] };
  signal.throwIfAborted();
  return { paused: { asking, order, round } };
}

/** Where a reply's loop of model calls starts: the first call, or the one after a paused round. */
export interface LoopState {
  call: number;
  messages: ChatMessage[];
  draft: Written;
}

/** A reply that paused for approvals: the caller ends nothing (the reply goes on when they are answered). */
export const PAUSED = Symbol('paused for approval');

/**
 * One agent's reply from `loop`: model calls streamed to the session (each may ask for tools,
 * whose results feed the next), then saved with its token usage and shown whole
 * (`assistant_message`). A reply that does not complete is ended by `rt.fail`; either way, this
 * resolves (null for no reply, PAUSED for one that waits for approvals).
 */
async function runReply(
  rt: ReplyRuntime,
  job: ReplyJob,
  target: Target,
  agent: ReplyAgent,
  loop: LoopState,
  signal: AbortSignal,
): Promise<MessageView | null | typeof PAUSED> {
  const { sessionId, promptId } = job;
  const { messageId, agentId } = target;
  const { base, thinks } = chatRequest(rt, agent, job.thinking, { messages: [], maxTokens: rt.llm.maxCompletionTokens });
  const limits = { maxCompletionTokens: rt.llm.maxCompletionTokens, maxCallMs: rt.llm.maxCallMs };
  const { messages, draft } = loop;
  const { sink, close } = draftSink(rt, job, target, draft, thinks);
  const ended = rt.metrics.started();
  try {
    // Inside: a tool source that fails (the database out of reach) fails the reply, which ends.
    const tools = await rt.tools.offer(agent.id, agentTools(agent), Boolean(agent.mcpTools));
    for (let call = loop.call; ; call++) {
      signal.throwIfAborted();
      await reserveCall(rt, sessionId, call, draft);
      const called = await streamCall(rt.provider, { ...base, tools, messages }, signal, sink, limits, call);
      draft.promptTokens += called.usage.prompt;
      draft.completionTokens += called.usage.completion;
      if (called.calls.length === 0) break;
      if (call + 1 >= MAX_CALLS_PER_REPLY)
        throw new ReplyStopped(`The reply used its ${MAX_CALLS_PER_REPLY} model calls without finishing`);
      const round = await toolRound(rt, job, target, loop, called, signal);
      if ('paused' in round) {
        const { asking, order, round: calls } = round.paused;
        const state = { call, messages: [...messages, asking], order, results: calls.results, written: draft };
        return (await pauseReply(rt, job, target, state, calls.awaiting)) ? PAUSED : null;
      }
      messages.push(...round.messages);
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

/** One agent's reply to a prompt, from its first model call (see `runReply`). */
export function writeReply(rt: ReplyRuntime, job: ReplyJob, target: Target, agent: ReplyAgent, request: ReplyRequest, signal: AbortSignal) {
  const draft: Written = { content: '', thought: '', promptTokens: 0, completionTokens: 0 };
  return runReply(rt, job, target, agent, { call: 0, messages: [...request.messages], draft }, signal);
}

/**
 * A paused reply, once every call it waited for is answered: the approved ones run (charged as
 * any call), the model is told of the others why not, and the reply goes on from the next model
 * call, with the text and tokens it had.
 */
export async function continueReply(
  rt: ReplyRuntime,
  job: ReplyJob,
  target: Target,
  agent: ReplyAgent,
  paused: PausedReply,
  signal: AbortSignal,
) {
  const draft = { ...paused.written };
  let answered: ToolResult[];
  try {
    const ctx = {
      sessionId: job.sessionId,
      promptId: job.promptId,
      messageId: target.messageId,
      agentId: target.agentId,
      userId: job.userId,
      signal,
    };
    answered = await rt.tools.resume(paused.waiting, ctx);
  } catch (e) {
    await rt.fail(job, target, signal.aborted ? signal.reason : e, draft);
    return null;
  }
  const messages = [...paused.messages, ...toolMessages(paused.order, [...paused.results, ...answered])];
  return runReply(rt, job, target, agent, { call: paused.call + 1, messages, draft }, signal);
}
