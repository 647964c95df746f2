import { Decimal } from '@prisma/client/runtime/client';
import { describe, expect, it } from 'vitest';
import type { LlmConfig } from '../../src/config.ts';
import { type ChatDelta, type ChatProvider, type ChatRequest, ProviderError } from '../../src/domain/core/chat.ts';
import type { MessageView, SessionEventPayload } from '../../src/domain/core/events.ts';
import { createReplyEngine } from '../../src/domain/replies/engine.ts';
import type { ReplyAgent } from '../../src/domain/replies/ports.ts';
import { withOneRetry } from '../../src/domain/replies/provider.ts';
import { toolDefinitionSchema } from '../../src/domain/tools/definition.ts';
import { textExecutor } from '../../src/domain/tools/executors/text.ts';
import type { Executor } from '../../src/domain/tools/executors/types.ts';
import { createToolHost } from '../../src/domain/tools/host.ts';
import { MOST_PROGRESS_EVENTS } from '../../src/domain/tools/run-call.ts';
import { toolRunQueue } from '../../src/domain/tools/run-queue.ts';
import type { ToolRegistry } from '../../src/domain/tools/registry.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { createMemoryBus } from '../../src/realtime/memory-bus.ts';
import { type MemoryDatabase, memoryDatabase, memoryReplyStore, memoryToolStore, type SessionRow } from './in-memory-stores.ts';
import { mediaLinks } from '../../src/domain/core/media-links.ts';

// The reply engine's decisions, and the tool host's, over stores kept in memory and a model
// that follows a script: when a budget stops a reply, which tool calls run and which are
// refused uncharged, and how each way a reply can fail is saved and told. No app, no database;
// the same rules over the real stores and the fake OpenAI server are what test/rest and
// test/graphql exercise.

const ALICE = 'alice-id';
const agent: ReplyAgent = {
  id: 'agent-muse',
  name: 'Muse',
  description: 'Sketches things.',
  persona: '',
  greeting: '',
  knowledge: '',
  tools: { sketch: true },
  suggestions: [],
  llmSettings: {},
  user: { username: 'muse' },
};

/** One tool, run by the built-in text executor, costing 2 manna a call. */
const sketch = toolDefinitionSchema.parse({
  key: 'sketch',
  name: 'Sketch',
  description: 'Sketches what it is asked to.',
  output_type: 'text',
  order: 1,
  cost_estimate: '2',
  parameters: [{ name: 'prompt', type: 'string', description: 'What to sketch.', required: true }],
  handler: 'text',
});
const registry: ToolRegistry = {
  listAvailable: () => [sketch],
  isAvailable: (key) => key === 'sketch',
  canEnable: (key) => key === 'sketch',
  get: (key) => (key === 'sketch' ? sketch : undefined),
  all: () => [sketch],
};

const llm: LlmConfig = {
  baseUrl: 'http://scripted.invalid',
  apiKey: undefined,
  models: { default: 'scripted', low: 'scripted', medium: 'scripted', high: 'scripted' },
  contextTokens: 4_000,
  maxCompletionTokens: 50,
  firstTokenTimeoutMs: 10_000,
  idleTimeoutMs: 10_000,
  maxCallMs: 60_000,
  offlineTokenDelayMs: 0,
  checkpointMs: 0,
};

/** What one model call does, step by step. */
type Step =
  | { content: string }
  | { tool: string; args?: object }
  | { usage: [prompt: number, completion: number] }
  | { fail: ProviderError }
  | { meanwhile: () => void }
  /** Sends nothing more until the call is stopped. */
  | 'stall';

/** A model that plays one script per call it is asked, a step per turn of the event loop. */
function scriptedModel(...calls: Step[][]) {
  const requests: ChatRequest[] = [];
  const provider: ChatProvider = {
    description: 'a scripted model',
    complete: async () => 'A Fox Sketch',
    async stream(request, signal, onDelta: (delta: ChatDelta) => void) {
      requests.push({ ...request, messages: [...request.messages] });
      const script = calls.shift();
      if (!script) throw new Error('the model was asked more calls than its script has');
      let tools = 0;
      for (const step of script) {
        await new Promise((resolve) => setImmediate(resolve));
        signal.throwIfAborted();
        if (step === 'stall')
          await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
        else if ('content' in step) onDelta({ type: 'content', text: step.content });
        else if ('tool' in step)
          onDelta({
            type: 'tool_call',
            index: tools,
            id: `tc${++tools}`,
            name: step.tool,
            arguments: JSON.stringify(step.args ?? { prompt: 'a fox' }),
          });
        else if ('usage' in step) onDelta({ type: 'usage', promptTokens: step.usage[0], completionTokens: step.usage[1] });
        else if ('fail' in step) throw step.fail;
        else step.meanwhile();
      }
    },
  };
  return { provider, requests };
}

const message = (id: string, ordinal: number, fields: Partial<MessageView>): MessageView => ({
  id,
  sessionId: 's1',
  ordinal,
  role: 'assistant',
  senderId: agent.id,
  promptId: 'p1',
  status: 'complete',
  content: '',
  attachments: [],
  thought: null,
  error: null,
  promptTokens: 0,
  completionTokens: 0,
  toolCalls: [],
  reactions: {},
  createdAt: new Date().toISOString(),
  ...fields,
});

interface Setup {
  session?: Partial<SessionRow>;
  work?: { toolCallsPerModelCall?: number; toolCallsPerReply?: number };
  llm?: Partial<LlmConfig>;
  /** Wraps the model as the composition does for an OpenAI-compatible endpoint. */
  retry?: boolean;
  /** Runs the sketches instead of the text executor. */
  executor?: Executor;
}

/** A session whose prompt `p1` is answered by `r1`, its turn reserved with the prompt, and the engine over it. */
function setup(model: ReturnType<typeof scriptedModel>, options: Setup = {}) {
  const db: MemoryDatabase = memoryDatabase();
  db.sessions.set('s1', {
    id: 's1',
    ownerId: ALICE,
    title: null,
    scenario: null,
    agents: [agent],
    turnBudget: null,
    tokenBudget: null,
    mannaBudget: null,
    turnsSpent: 1,
    tokensSpent: 0,
    mannaSpent: new Decimal(0),
    ...options.session,
  });
  db.messages.set('p1', message('p1', 1, { role: 'user', senderId: ALICE, promptId: null, content: 'Sketch me a fox' }));
  db.messages.set('r1', message('r1', 2, { status: 'streaming' }));
  db.balances.set(ALICE, { subscription: new Decimal(1), forever: new Decimal(10) });
  db.agentTools.set(agent.id, { tools: { sketch: true }, ownerId: 'owner-id', ownerPays: 'off' });

  const events: SessionEventPayload[] = [];
  const memoryBus = createMemoryBus({
    replayLimit: 1000,
    replayBytes: 1 << 20,
    idleTtlMs: 60_000,
    streamBufferBytes: 1 << 20,
    slowClientMs: 10_000,
    heartbeatMs: 10_000,
    accessRecheckMs: 10_000,
  });
  const bus = {
    ...memoryBus,
    publish(sessionId: string, e: SessionEventPayload) {
      events.push(e);
      return memoryBus.publish(sessionId, e);
    },
  };
  const metrics = createMetrics();
  const providerErrors: string[] = [];
  const tools = createToolHost({
    store: memoryToolStore(db),
    registry,
    executors: new Map([['sketch', options.executor ?? textExecutor]]),
    search: { indexCreations: async () => ({ embedded: 0 }) },
    bus,
    log: { error: () => {} },
    metrics: metrics.manna,
    work: { toolCallsPerModelCall: 4, toolCallsPerReply: 8, ...options.work },
    queue: toolRunQueue({ perUser: 4, total: 8 }),
    links: mediaLinks(() => 'http://parley.test'),
  });
  const engine = createReplyEngine({
    store: memoryReplyStore(db),
    bus,
    provider: options.retry ? withOneRetry(model.provider, (kind) => providerErrors.push(kind)) : model.provider,
    offline: false,
    llm: { ...llm, ...options.llm },
    tools,
    instanceId: 'test',
    log: { error: () => {} },
    metrics: metrics.replies,
  });
  const job = {
    sessionId: 's1',
    promptId: 'p1',
    userId: ALICE,
    replies: [{ messageId: 'r1', agentId: agent.id, ordinal: 2, createdAt: new Date() }],
    thinking: false,
    excludeMemory: true,
    generateTitle: false,
  };
  /** Starts the reply and resolves once every reply to the prompt has ended. */
  const answer = async () => {
    engine.start(job);
    await expect.poll(() => events.some((e) => e.type === 'end_prompt'), { timeout: 10_000 }).toBe(true);
  };
  const reply = () => db.messages.get('r1')!;
  const calls = () => [...db.calls.values()];
  const errorEvent = () => events.find((e) => e.type === 'error');
  return { db, bus, engine, events, answer, reply, calls, errorEvent, providerErrors, session: db.sessions.get('s1')! };
}

const toolResults = (request: ChatRequest) => request.messages.flatMap((m) => (m.role === 'tool' ? [JSON.parse(m.content)] : []));

describe('a reply the model finishes', () => {
  it('is saved complete with its usage, counted on the session, and shown whole', async () => {
    const model = scriptedModel([{ content: 'A fox' }, { content: ', drawn.' }, { usage: [12, 3] }]);
    const s = setup(model);
    await s.answer();
    expect(s.reply()).toMatchObject({ status: 'complete', content: 'A fox, drawn.', promptTokens: 12, completionTokens: 3 });
    expect(s.session).toMatchObject({ tokensSpent: 15, turnsSpent: 1 });
    expect(s.events.map((e) => e.type)).toEqual(['assistant_token', 'assistant_token', 'assistant_message', 'end_prompt']);
  });
});

describe('budgets stop a reply before its next model call', () => {
  /** The first call asks for a sketch: the second needs a turn of its own. */
  const askingForATool = (): Step[] => [{ content: 'Let me sketch.' }, { tool: 'sketch' }, { usage: [15, 5] }];

  it.each([
    ['turn', { turnBudget: 1 }, 'Session turn budget exceeded'],
    ['token', { tokenBudget: 20 }, 'Session token budget exceeded'],
    // The sketch's 2 manna reach the budget: what is spent is not below it any more.
    ['manna', { mannaBudget: new Decimal(2) }, 'Session manna budget exceeded'],
  ])('the %s budget: saved failed with what it wrote and why, its tokens counted', async (_, budget, error) => {
    const model = scriptedModel(askingForATool(), [{ content: 'never asked' }]);
    const s = setup(model, { session: budget });
    await s.answer();
    expect(model.requests).toHaveLength(1);
    expect(s.reply()).toMatchObject({ status: 'failed', error, content: 'Let me sketch.', promptTokens: 15, completionTokens: 5 });
    expect(s.errorEvent()).toMatchObject({ error, message: { id: 'r1', status: 'failed', error } });
    expect(s.session.tokensSpent).toBe(20);
    // The tool ran before the budget stopped the reply, and its charge stands.
    expect(s.calls().map((c) => [c.status, c.cost?.toString()])).toEqual([['completed', '2']]);
    expect(s.session.mannaSpent.toString()).toBe('2');
  });

  it('a tool call past the manna budget fails uncharged, and the model is told why', async () => {
    const model = scriptedModel(askingForATool(), [{ content: 'I could not sketch it.' }]);
    const s = setup(model, { session: { mannaBudget: new Decimal(1) } });
    await s.answer();
    expect(s.calls()).toMatchObject([{ status: 'failed', error: 'Session manna budget exceeded', cost: null }]);
    expect(toolResults(model.requests[1]!)).toEqual([{ error: 'Session manna budget exceeded' }]);
    expect(s.db.ledger).toEqual([]);
    expect(s.reply()).toMatchObject({ status: 'complete', content: 'Let me sketch.I could not sketch it.' });
  });

  it('a reply that keeps asking for tools stops after 8 model calls', async () => {
    const model = scriptedModel(...Array.from({ length: 9 }, (): Step[] => [{ tool: 'sketch' }]));
    const s = setup(model, { work: { toolCallsPerReply: 20 } });
    await s.answer();
    expect(model.requests).toHaveLength(8);
    expect(s.reply()).toMatchObject({ status: 'failed', error: 'The reply used its 8 model calls without finishing' });
    // The eighth call's tools were never run.
    expect(s.calls()).toHaveLength(7);
    expect(s.session.turnsSpent).toBe(8);
  });
});

describe('tool caps', () => {
  it('past the calls per model call and per reply, the rest fail uncharged with the reason', async () => {
    const model = scriptedModel(
      [{ tool: 'sketch' }, { tool: 'sketch' }, { tool: 'sketch' }],
      [{ tool: 'sketch' }],
      [{ content: 'Two sketches.' }],
    );
    const s = setup(model, { work: { toolCallsPerModelCall: 2, toolCallsPerReply: 3 } });
    await s.answer();

    const perCall = 'Too many tool calls at once: at most 2 run per model call';
    const perReply = 'Too many tool calls: at most 3 run per reply';
    expect(s.calls().map((c) => [c.position, c.status, c.cost?.toString() ?? null, c.error])).toEqual([
      [0, 'completed', '2', null],
      [1, 'completed', '2', null],
      [2, 'failed', null, perCall],
      [3, 'failed', null, perReply],
    ]);
    // Only the two that ran were charged: subscription manna first, then forever manna.
    expect(s.db.ledger.map((l) => [l.toolCallId, l.kind, l.amount.toString()])).toEqual([
      ['call-1', 'subscription', '-1'],
      ['call-1', 'forever', '-1'],
      ['call-2', 'forever', '-2'],
    ]);
    const balance = s.db.balances.get(ALICE)!;
    expect([balance.subscription.toString(), balance.forever.toString()]).toEqual(['0', '7']);
    expect(s.session.mannaSpent.toString()).toBe('4');
    // The model hears each call's result, or why it did not run.
    expect(toolResults(model.requests[1]!)).toEqual([
      expect.objectContaining({ target: 'image' }),
      expect.objectContaining({ target: 'image' }),
      { error: perCall },
    ]);
    expect(toolResults(model.requests[2]!).at(-1)).toEqual({ error: perReply });
    // Watchers see every call settle, and the reply complete.
    const settled = s.events.flatMap((e) => (e.type === 'tool_complete' ? [e.toolCall.status] : []));
    expect(settled.sort()).toEqual(['completed', 'completed', 'failed', 'failed']);
    expect(s.reply()).toMatchObject({ status: 'complete', content: 'Two sketches.' });
  });
});

describe('how a reply that does not complete ends', () => {
  const unavailable = () => new ProviderError('The model provider answered HTTP 503', true, 'server_error');

  it('a provider error before the first token is tried once more', async () => {
    const model = scriptedModel([{ fail: unavailable() }], [{ content: 'second' }, { content: ' try' }]);
    const s = setup(model, { retry: true });
    await s.answer();
    expect(model.requests).toHaveLength(2);
    expect(s.reply()).toMatchObject({ status: 'complete', content: 'second try' });
    expect(s.providerErrors).toEqual([]);
  });

  it('failing again, it is saved failed with the provider’s message, the failure counted once', async () => {
    const model = scriptedModel([{ fail: unavailable() }], [{ fail: unavailable() }]);
    const s = setup(model, { retry: true });
    await s.answer();
    expect(model.requests).toHaveLength(2);
    expect(s.reply()).toMatchObject({ status: 'failed', error: 'The model provider answered HTTP 503', content: '' });
    expect(s.errorEvent()).toMatchObject({ error: 'The model provider answered HTTP 503', message: { status: 'failed' } });
    expect(s.providerErrors).toEqual(['server_error']);
  });

  it('an error in the middle of a reply ends it with what it wrote, without another try', async () => {
    const cut = new ProviderError('The connection to the model provider closed in the middle of a reply', false, 'interrupted');
    const model = scriptedModel([{ content: 'par' }, { content: 'tial' }, { fail: cut }]);
    const s = setup(model, { retry: true });
    await s.answer();
    expect(model.requests).toHaveLength(1);
    expect(s.reply()).toMatchObject({ status: 'failed', error: cut.message, content: 'partial' });
    expect(s.errorEvent()).toMatchObject({ error: cut.message, message: { content: 'partial', status: 'failed' } });
    expect(s.events.at(-1)).toEqual({ type: 'end_prompt', promptId: 'p1' });
  });

  it('a model that stalls is cut off at the call’s time limit, charged what it streamed', async () => {
    const model = scriptedModel([{ content: 'so' }, { content: ' far' }, 'stall']);
    const s = setup(model, { llm: { maxCallMs: 300 } });
    await s.answer();
    const error = 'The model call ran past its limit of 0.3 s';
    expect(s.reply()).toMatchObject({ status: 'failed', error, content: 'so far' });
    expect(s.reply().promptTokens + s.reply().completionTokens).toBeGreaterThan(0);
    expect(s.errorEvent()).toMatchObject({ error });
  });

  it('a cancel saves it cancelled with what it wrote', async () => {
    const model = scriptedModel([{ content: 'Drawing' }, { tool: 'sketch' }], ['stall']);
    const s = setup(model);
    const asked = expect.poll(() => model.requests.length, { timeout: 10_000 }).toBe(2);
    const answered = s.answer();
    await asked;
    await s.bus.cancelReplies({ sessionId: 's1', promptId: 'p1', reason: 'cancelled' });
    await answered;
    expect(s.reply()).toMatchObject({ status: 'cancelled', error: 'The reply was cancelled', content: 'Drawing' });
    expect(s.errorEvent()).toMatchObject({ error: 'The reply was cancelled', message: { status: 'cancelled' } });
    // The sketch had completed before the cancel: its charge stands.
    expect(s.calls()).toMatchObject([{ status: 'completed' }]);
    expect(s.session.mannaSpent.toString()).toBe('2');
  });

  it('a running call’s progress goes to the session live, at most MOST_PROGRESS_EVENTS of it, before the call settles', async () => {
    const model = scriptedModel([{ tool: 'sketch' }, { content: 'Drawn' }]);
    const executor: Executor = async ({ progress }) => {
      for (let step = 1; step <= MOST_PROGRESS_EVENTS + 50; step++) progress?.(step / (MOST_PROGRESS_EVENTS + 50), `step ${step}`);
      return { result: 'sketched' };
    };
    const s = setup(model, { executor });
    await s.answer();
    const progress = s.events.filter((e) => e.type === 'tool_progress');
    expect(progress).toHaveLength(MOST_PROGRESS_EVENTS);
    expect(progress[0]).toMatchObject({ tool: 'sketch', detail: 'step 1', toolCallId: s.calls()[0]!.id, messageId: 'r1', promptId: 'p1' });
    expect(s.events.findIndex((e) => e.type === 'tool_progress')).toBeLessThan(s.events.findIndex((e) => e.type === 'tool_complete'));
    expect(s.calls()).toMatchObject([{ status: 'completed' }]);
  });

  it('a cancel while a tool runs cancels the call and gives its hold back', async () => {
    const model = scriptedModel([{ content: 'Drawing' }, { tool: 'sketch' }]);
    let running = false;
    const executor: Executor = ({ signal }) =>
      new Promise((_, reject) => {
        running = true;
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    const s = setup(model, { executor });
    const answered = s.answer();
    await expect.poll(() => running, { timeout: 10_000 }).toBe(true);
    expect(s.calls()).toMatchObject([{ status: 'running', cost: new Decimal(2) }]);
    await s.bus.cancelReplies({ sessionId: 's1', promptId: 'p1', reason: 'cancelled' });
    await answered;
    expect(s.reply()).toMatchObject({ status: 'cancelled', content: 'Drawing' });
    expect(s.calls()).toMatchObject([{ status: 'cancelled', error: 'The reply was stopped before the tool finished' }]);
    expect(s.events.find((e) => e.type === 'tool_cancelled')).toMatchObject({ toolCall: { status: 'cancelled' } });
    expect(s.db.ledger.map((l) => l.amount.toString())).toEqual(['-1', '-1', '1', '1']);
    const balance = s.db.balances.get(ALICE)!;
    expect([balance.subscription.toString(), balance.forever.toString(), s.session.mannaSpent.toString()]).toEqual(['1', '10', '0']);
  });

  it('a deleted session’s reply is neither saved nor told', async () => {
    const model = scriptedModel([{ content: 'Drawing' }, 'stall']);
    const s = setup(model);
    s.engine.start({
      sessionId: 's1',
      promptId: 'p1',
      userId: ALICE,
      replies: [{ messageId: 'r1', agentId: agent.id, ordinal: 2, createdAt: new Date() }],
      thinking: false,
      excludeMemory: true,
      generateTitle: false,
    });
    await expect.poll(() => s.events.length, { timeout: 10_000 }).toBe(1);
    await s.bus.cancelReplies({ sessionId: 's1', reason: 'deleted' });
    await s.engine.drain(5_000);
    expect(s.reply()).toMatchObject({ status: 'streaming' });
    expect(s.events.map((e) => e.type)).toEqual(['assistant_token']);
  });

  it('when the database is away, watchers are told at once and the save waits for it to come back', async () => {
    let db: MemoryDatabase | undefined;
    const cut = new ProviderError('The model provider reported an error: overloaded', false, 'reported');
    const model = scriptedModel([{ content: 'half' }, { meanwhile: () => (db!.away = true) }, { fail: cut }]);
    const s = setup(model);
    db = s.db;
    await s.answer();
    // Told with the message as it will be saved, though it is not saved yet.
    expect(s.errorEvent()).toMatchObject({ error: cut.message, message: { id: 'r1', status: 'failed', content: 'half' } });
    expect(s.reply()).toMatchObject({ status: 'streaming' });
    s.db.away = false;
    await expect.poll(() => s.reply().status, { timeout: 5_000 }).toBe('failed');
    expect(s.reply()).toMatchObject({ error: cut.message, content: 'half' });
  });
});
