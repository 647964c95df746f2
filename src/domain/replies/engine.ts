import type { LlmConfig } from '../../config.ts';
import type { Db } from '../../db/database.ts';
import type { Prisma } from '../../generated/prisma/client.ts';
import type { Metrics } from '../../observability/metrics.ts';
import type { EventBus } from '../core/bus.ts';
import { agentLlmSettings, agentSuggestions, agentTools } from '../agents/fields.ts';
import { isDatabaseUnavailable, isRecordGone } from '../core/stores/prisma-errors.ts';
import { addTokens, BUDGET_EXCEEDED, reserveTurns } from '../core/budgets.ts';
import type { MessageView, SessionEventPayload } from '../core/events.ts';
import { type MessageRow, messageSelect, toMessageView } from '../core/stores/message-rows.ts';
import { abandonToolCalls } from '../core/holds.ts';
import { buildPrompt, type PromptAgent } from './prompt.ts';
import { ProviderError, type ChatMessage, type ChatProvider, type ChatRequest } from '../core/chat.ts';
import { cleanModelTitle, fallbackTitle, TITLE_INSTRUCTION, titleFromText } from './title.ts';
import { CallLimitReached, type CallSink, type StreamedCall, streamCall } from './stream-call.ts';
import { noMemory, noTools, type MemoryHost, type ToolHost } from '../core/tool-host.ts';
import { createReplyWriter, type ReplyWriter } from './writer.ts';
import { within } from '../core/within.ts';

/** One prompt's replies, as the sessions service hands them over once the prompt is saved. */
export interface ReplyJob {
  sessionId: string;
  promptId: string;
  /** The user who sent the prompt. */
  userId: string;
  /** The placeholder assistant message of each agent that answers, made with the prompt. */
  replies: { messageId: string; agentId: string; ordinal: number; createdAt: Date }[];
  thinking: boolean;
  excludeMemory: boolean;
  /** The first exchange of a session without a title: name it afterwards. */
  generateTitle: boolean;
  /** The session and its messages so far, when the caller has them (a session it just created). */
  known?: {
    scenario: string | null;
    agents: LoadedAgent[];
    history: HistoryRow[];
    /** What each agent remembers of the user, read with the agents (absent with `excludeMemory`). */
    memories?: Map<string, string[]>;
  };
}

export interface ReplyEngineDeps {
  db: Db;
  bus: EventBus;
  provider: ChatProvider;
  /** True for the offline responder: titles then come from the text, not from a model call. */
  offline: boolean;
  llm: LlmConfig;
  tools?: ToolHost;
  memory?: MemoryHost;
  /** This process, as recorded on the replies it writes (see `recovery.ts`). */
  instanceId: string;
  log: { error(obj: unknown, msg?: string): void };
  metrics: Metrics['replies'];
  /** Where streaming replies are saved; by default a write-behind queue on `db`. */
  writer?: ReplyWriter;
}

/** Model calls one reply may make (each is a turn of the budget) before it must answer. */
const MAX_CALLS_PER_REPLY = 8;
/** Stored messages read for a prompt; the context window usually keeps fewer. */
const HISTORY_LIMIT = 200;

/** A reply stopped by a rule of the service (a budget, the number of model calls), worded for the user. */
class ReplyStopped extends Error {}

/** Why a reply was stopped from outside, as the abort reason of its signal. */
const SESSION_GONE = Symbol('session deleted');
const CANCELLED = Symbol('cancelled');
const SHUTTING_DOWN = Symbol('shutting down');

type Target = ReplyJob['replies'][number];
type ReplyRequest = Omit<ChatRequest, 'agent' | 'model' | 'reasoningEffort' | 'tools'>;

/**
 * How a reply that did not complete is saved and told, by what stopped it. `expected` failures
 * are the provider's, the service's rules, or the database going away; anything else is logged.
 */
function failureOf(reason: unknown): { status: 'failed' | 'cancelled'; error: string; expected: boolean } {
  if (reason === CANCELLED) return { status: 'cancelled', error: 'The reply was cancelled', expected: true };
  if (reason === SHUTTING_DOWN) return { status: 'failed', error: 'The server shut down before the reply was finished', expected: true };
  if (reason instanceof ProviderError || reason instanceof ReplyStopped || reason instanceof CallLimitReached)
    return { status: 'failed', error: reason.message, expected: true };
  if (isDatabaseUnavailable(reason)) return { status: 'failed', error: DATABASE_LOST, expected: true };
  return { status: 'failed', error: 'The reply failed unexpectedly', expected: false };
}

/** How a reply ended, as it is saved. */
interface Outcome {
  content: string;
  thought: string;
  status: 'complete' | 'failed' | 'cancelled';
  error: string | null;
  promptTokens: number;
  completionTokens: number;
}

const DATABASE_LOST = 'The database became unavailable while the reply was being written';

const UNSETTLED_TOOL = 'The reply ended before the tool call was settled';
/** Retries of a reply that could not be saved because the database was away: from 1 s, doubling, up to 30 s apart. */
const SAVE_RETRY_FIRST_MS = 1_000;
const SAVE_RETRY_MAX_MS = 30_000;

/** The message as `fail` would have saved it, for watchers while the database is away. */
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

type LoadedAgent = Prisma.AgentGetPayload<{ include: { user: { select: { username: true } } } }>;
type HistoryRow = Omit<MessageRow, 'toolCalls' | 'reactions'> &
  Partial<Pick<MessageRow, 'toolCalls' | 'reactions'>> & { sender: { username: string } | null };

function loadSession(db: Db, sessionId: string) {
  return db.session.findUnique({
    where: { id: sessionId },
    select: {
      scenario: true,
      agents: { orderBy: { position: 'asc' }, select: { agent: { include: { user: { select: { username: true } } } } } },
    },
  });
}

const profileOf = (a: LoadedAgent): PromptAgent => ({
  id: a.id,
  key: a.user.username,
  name: a.name,
  description: a.description,
  persona: a.persona,
  greeting: a.greeting,
  knowledge: a.knowledge,
});

/**
 * Runs replies in the background: each agent's reply is a loop of model calls (a model call may
 * ask for tools, whose results feed the next call) streamed to the session's event bus, then
 * saved with its token usage. Replies outlive the request that started them: a client that
 * disconnects does not stop one.
 */
export function createReplyEngine(deps: ReplyEngineDeps) {
  const { db, bus, provider, llm, log, metrics } = deps;
  const tools = deps.tools ?? noTools;
  const memory = deps.memory ?? noMemory;
  const writer = deps.writer ?? createReplyWriter(db, log);
  const limits = { maxCompletionTokens: llm.maxCompletionTokens, maxCallMs: llm.maxCallMs };
  /** Replies being written, by session: how to stop each prompt's replies. */
  const running = new Map<string, Set<{ promptId: string; controller: AbortController }>>();
  const active = new Set<Promise<void>>();
  /** Work of this engine that shutdown waits for (within its grace period), besides the replies. */
  const track = (task: Promise<void>) => {
    active.add(task);
    void task.finally(() => active.delete(task));
  };
  /** Aborted when the grace period ends: what a reply set off afterwards (memories) is given up. */
  const housekeeping = new AbortController();
  /** Saves waiting for the database to come back; dropped on shutdown (start-up recovery closes those replies). */
  const retries = new Set<NodeJS.Timeout>();

  const emit = (sessionId: string, event: SessionEventPayload) =>
    bus.publish(sessionId, event).catch((err) => log.error({ err }, 'could not publish a session event'));

  /**
   * Saves a reply as it ended, with its tokens counted on the session in the same transaction. A
   * reply that did not complete leaves no tool call unsettled: one whose settling failed (the
   * database went away meanwhile) is cancelled and its hold given back.
   */
  async function save(sessionId: string, messageId: string, fields: Outcome) {
    const saved = await db.$transaction(async (tx) => {
      await addTokens(tx, sessionId, fields.promptTokens + fields.completionTokens);
      if (fields.status !== 'complete') await abandonToolCalls(tx, { messageId }, UNSETTLED_TOOL);
      const row = await tx.message.update({
        where: { id: messageId },
        data: {
          content: fields.content,
          thought: fields.thought || null,
          status: fields.status,
          error: fields.error,
          promptTokens: fields.promptTokens,
          completionTokens: fields.completionTokens,
        },
        select: messageSelect,
      });
      return toMessageView(row);
    });
    metrics.usage(fields.promptTokens, fields.completionTokens);
    return saved;
  }

  /** The request every model call of this agent's reply starts from, and whether it shows its reasoning. */
  function chatRequest(agent: LoadedAgent, thinking: boolean, request: ReplyRequest) {
    const settings = agentLlmSettings(agent);
    const thinks = settings.thinkingPolicy === 'always' || (settings.thinkingPolicy !== 'off' && thinking);
    const base: ChatRequest = {
      ...request,
      model: (settings.modelProfile && llm.models[settings.modelProfile as keyof typeof llm.models]) || llm.models.default,
      reasoningEffort: thinks ? ((settings.thinkingEffortCap as ChatRequest['reasoningEffort']) ?? 'medium') : null,
      tools: tools.offer(agent.id, agentTools(agent)),
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
   * Runs the tools one model call asked for. The reply is saved as it stands and its watchers
   * see it, with the calls it waits for, before they run; the results go back to the model.
   */
  async function runTools(job: ReplyJob, target: Target, content: string, called: StreamedCall, signal: AbortSignal) {
    const { sessionId, promptId } = job;
    const { messageId, agentId } = target;
    const recorded = await tools.record(called.calls, { sessionId, promptId, messageId, agentId, userId: job.userId, signal });
    const row = await db.message.update({ where: { id: messageId }, data: { content }, select: messageSelect });
    await emit(sessionId, { type: 'assistant_message', promptId, agentId, message: toMessageView(row) });
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
   * feed the next), then saved with its token usage and shown whole (`assistant_message`).
   */
  async function reply(job: ReplyJob, target: Target, agent: LoadedAgent, request: ReplyRequest, signal: AbortSignal) {
    const { sessionId, promptId } = job;
    const { messageId, agentId } = target;
    const { base, thinks } = chatRequest(agent, job.thinking, request);
    const messages: ChatMessage[] = [...request.messages];
    const draft = { content: '', thought: '', promptTokens: 0, completionTokens: 0 };
    // The text so far is saved now and then while it streams, so that a process that dies
    // leaves the reply with most of what its watchers saw (start-up recovery marks it failed).
    // At most one per interval, armed by the first delta after the last one (so a provider that
    // pauses still has its text saved), handed to the writer, which groups it with the others.
    let checkpointTimer: NodeJS.Timeout | undefined;
    const checkpoint = () => {
      if (checkpointTimer || llm.checkpointMs === 0) return;
      checkpointTimer = setTimeout(() => {
        checkpointTimer = undefined;
        writer.checkpoint({ messageId, content: draft.content, thought: draft.thought });
      }, llm.checkpointMs);
    };
    const sink: CallSink = {
      content(text) {
        draft.content += text;
        checkpoint();
        metrics.streamed('content');
        void emit(sessionId, { type: 'assistant_token', promptId, messageId, agentId, text });
      },
      reasoning: thinks
        ? (text) => {
            draft.thought += text;
            checkpoint();
            metrics.streamed('reasoning');
            void emit(sessionId, { type: 'assistant_thinking', promptId, messageId, agentId, text });
          }
        : undefined,
    };
    const ended = metrics.started();
    try {
      for (let call = 0; ; call++) {
        signal.throwIfAborted();
        // The first call's turn was reserved with the prompt; every further call needs its own.
        if (call > 0) {
          const stopped = await reserveTurns(db, sessionId, 1, draft.promptTokens + draft.completionTokens);
          if (stopped) throw new ReplyStopped(BUDGET_EXCEEDED[stopped]);
        }
        const called = await streamCall(provider, { ...base, messages }, signal, sink, limits, call);
        draft.promptTokens += called.usage.prompt;
        draft.completionTokens += called.usage.completion;
        if (called.calls.length === 0) break;
        if (call + 1 >= MAX_CALLS_PER_REPLY)
          throw new ReplyStopped(`The reply used its ${MAX_CALLS_PER_REPLY} model calls without finishing`);
        messages.push(...(await runTools(job, target, draft.content, called, signal)));
      }
      const message = await writer.complete({ sessionId, messageId, ...draft });
      // No longer streaming: its session was deleted, or recovery closed it and told its watchers.
      if (!message) return null;
      metrics.usage(draft.promptTokens, draft.completionTokens);
      await emit(sessionId, { type: 'assistant_message', promptId, agentId, message });
      return message;
    } catch (e) {
      if (e instanceof CallLimitReached) {
        draft.promptTokens += e.usage.prompt;
        draft.completionTokens += e.usage.completion;
      }
      await fail(job, target, signal.aborted ? signal.reason : e, draft);
      return null;
    } finally {
      clearTimeout(checkpointTimer);
      ended();
    }
  }

  /**
   * Ends a reply that did not complete: saved with what it had and why, and its watchers told
   * with an `error` event. When the database is what failed, they are told at once (with the
   * message as it would be saved) and the save is retried until the database is back.
   */
  async function fail(
    job: ReplyJob,
    target: Target,
    reason: unknown,
    written: Pick<Outcome, 'content' | 'thought' | 'promptTokens' | 'completionTokens'>,
  ) {
    if (reason === SESSION_GONE) return;
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

  async function title(job: ReplyJob, scenario: string | null, prompt: string, answer: string | undefined, signal: AbortSignal) {
    let text = titleFromText(prompt);
    if (!deps.offline && answer) {
      try {
        const request: ChatRequest = {
          model: llm.models.default,
          messages: [
            { role: 'system', content: TITLE_INSTRUCTION },
            { role: 'user', content: `User: ${prompt.slice(0, 2000)}\n\nAgent: ${answer.slice(0, 2000)}` },
          ],
          tools: [],
          maxTokens: 24,
          reasoningEffort: null,
          agent: { name: '', key: '', description: '', greeting: '', knowledge: '', suggestions: [] },
        };
        text = cleanModelTitle(await provider.complete(request, signal)) ?? fallbackTitle(prompt);
      } catch {
        text = fallbackTitle(prompt);
      }
    }
    if (await writer.title(job.sessionId, text)) await emit(job.sessionId, { type: 'session_updated', title: text, scenario });
  }

  async function run(job: ReplyJob, controller: AbortController) {
    const { signal } = controller;
    const nothingWritten = { content: '', thought: '', promptTokens: 0, completionTokens: 0 };
    let loaded;
    try {
      loaded = job.known
        ? ([{ scenario: job.known.scenario, agents: job.known.agents.map((agent) => ({ agent })) }, job.known.history] as const)
        : await Promise.all([
            loadSession(db, job.sessionId),
            db.message
              .findMany({
                where: { sessionId: job.sessionId, status: { not: 'streaming' } },
                orderBy: { ordinal: 'desc' },
                take: HISTORY_LIMIT,
                select: { ...messageSelect, sender: { select: { username: true } } },
              })
              .then((latest): HistoryRow[] => latest.reverse()),
          ]);
    } catch (e) {
      // Nothing could start (the database went away, say): every reply still ends, and the prompt.
      await Promise.all(job.replies.map((target) => fail(job, target, e, nothingWritten)));
      await emit(job.sessionId, { type: 'end_prompt', promptId: job.promptId });
      return;
    }
    const [session, history] = loaded;
    if (!session) return;
    const agents = new Map(session.agents.map((s) => [s.agent.id, s.agent]));
    // Agents go by their name in the conversation, people by their username.
    const names = new Map<string, string>(
      history.flatMap((m) => (m.senderId && m.sender ? [[m.senderId, m.sender.username] as const] : [])),
    );
    for (const a of agents.values()) names.set(a.id, a.name);
    const views = history.map((m) => toMessageView({ ...m, toolCalls: m.toolCalls ?? [], reactions: m.reactions ?? [] }));
    const prompt = views.find((m) => m.id === job.promptId);

    const results = await Promise.all(
      job.replies.map(async (target) => {
        const agent = agents.get(target.agentId);
        if (!agent) return null;
        let memories: string[];
        try {
          memories = job.excludeMemory ? [] : (job.known?.memories?.get(agent.id) ?? (await memory.recall(agent.id, job.userId)));
        } catch (e) {
          await fail(job, target, e, nothingWritten);
          return null;
        }
        const messages = buildPrompt({
          agent: profileOf(agent),
          scenario: session.scenario,
          otherAgents: [...agents.values()].filter((a) => a.id !== agent.id).map((a) => a.name),
          names,
          history: views,
          memory: memories,
          contextTokens: llm.contextTokens,
          maxCompletionTokens: llm.maxCompletionTokens,
        });
        const saved = await reply(job, target, agent, { messages, maxTokens: llm.maxCompletionTokens }, signal);
        if (saved && prompt && !job.excludeMemory) {
          const exchange = {
            agentId: agent.id,
            userId: job.userId,
            sessionId: job.sessionId,
            prompt: prompt.content,
            reply: saved.content,
          };
          track(memory.remember(exchange, housekeeping.signal).catch((err) => log.error({ err }, 'could not update memory')));
        }
        return saved;
      }),
    );
    if (signal.aborted && signal.reason === SESSION_GONE) return;
    await emit(job.sessionId, { type: 'end_prompt', promptId: job.promptId });
    // A title is a nicety: one that cannot be saved (the database went away) is left out.
    if (job.generateTitle && prompt)
      await title(job, session.scenario, prompt.content, results.find((r) => r)?.content, signal).catch((e) => {
        if (!isDatabaseUnavailable(e)) throw e;
      });
  }

  function stop(sessionId: string, promptId: string | undefined, reason: symbol) {
    let stopped = 0;
    for (const entry of running.get(sessionId) ?? []) {
      if (promptId && entry.promptId !== promptId) continue;
      entry.controller.abort(reason);
      stopped++;
    }
    return stopped;
  }

  // A cancel may be asked of any instance; the one writing the reply hears it here.
  bus.onCancelReplies(({ sessionId, promptId, reason }) => stop(sessionId, promptId, reason === 'deleted' ? SESSION_GONE : CANCELLED));

  return {
    /** Starts a prompt's replies in the background. */
    start(job: ReplyJob) {
      const entry = { promptId: job.promptId, controller: new AbortController() };
      const set = running.get(job.sessionId) ?? new Set();
      running.set(job.sessionId, set.add(entry));
      track(
        run(job, entry.controller)
          .catch((err) => {
            if (!isRecordGone(err)) log.error({ err }, 'a prompt could not be answered');
          })
          .finally(() => {
            set.delete(entry);
            if (set.size === 0) running.delete(job.sessionId);
          }),
      );
    },

    /**
     * Lets running replies, and the memories of those that complete, finish for up to `graceMs`;
     * then cuts the rest off (replies saved as failed, memories not kept). Saves still waiting
     * for the database are given up: start-up recovery closes those replies.
     */
    async drain(graceMs: number) {
      for (const timer of retries) clearTimeout(timer);
      retries.clear();
      if (active.size === 0) return;
      const deadline = Date.now() + graceMs;
      // A reply that completes meanwhile sets off its memories: they are waited for too.
      while (active.size > 0 && Date.now() < deadline) await within(Promise.all(active), deadline - Date.now(), undefined);
      for (const set of running.values()) for (const entry of set) entry.controller.abort(SHUTTING_DOWN);
      housekeeping.abort(SHUTTING_DOWN);
      await Promise.all(active);
    },

    activeCount: () => active.size,
    instanceId: deps.instanceId,
  };
}

export type ReplyEngine = ReturnType<typeof createReplyEngine>;
