import { beforeEach, describe, expect, it } from 'vitest';
import { TURN_QUEUE } from '../../src/domain/autonomy/index.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { expectError } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, type SseClient, type SseFrame } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';
import { until } from '../helpers/until.ts';

// Autonomous sessions over REST, on the real app, its job queue, the fake model and a real HTTP
// tool: the settings and their refusals, a loop of turns that stops at its budget and says so, a
// cancel that stops it, a person writing in between; and the token and manna budgets, each stop
// saying which budget, overspent by no more than the turn under way, the manna the owner's, each
// move a ledger row.

const NEEDS_BUDGET = 'Session cannot have auto-reply enabled without a set budget';
const MAKER_COST = 50;
const on = (reply_interval = 0) => ({ auto_reply: true, reply_interval, actor_selection_method: 'random_exclude_last' });

let t: TestApp;
let llm: FakeOpenAI;
let svc: Awaited<ReturnType<typeof startFakeToolService>>;
let alice: TestUser;
let bob: TestUser;
let agents: { id: string; name: string }[];
/** Ada and Bo again, each given the paid tool. */
let makers: { id: string }[];

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Well', ', ', 'indeed', '.'] });
  svc = await start.service(startFakeToolService());
  const toolsDir = await toolRegistryWith({ maker: httpTool('maker', svc.url, `${MAKER_COST} * n`) });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, toolsDir, jobs: { pollMs: 500, superviseS: 1 } });
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  await t.services.manna.grant('alice', '400', 'forever');
  const f = fixtures(t);
  agents = [await f.agent(alice, { name: 'Ada' }), await f.agent(alice, { name: 'Bo' })];
  makers = [await f.agent(alice, { name: 'Ada', tools: { maker: true } }), await f.agent(alice, { name: 'Bo', tools: { maker: true } })];
});

const sessionCount = () => t.db.session.count({ where: { ownerId: alice.id } });
const updates = (frames: SseFrame[], type: string) => frames.filter((f) => f.data?.data?.type === type).map((f) => f.data.data);

/** A new session of Ada and Bo with this budget, watched from the start. */
async function watchedSession(budget: Record<string, number>) {
  const res = await t.rest('POST', '/v2/sessions/create', { key: alice.apiKey, body: { agent_ids: agents.map((a) => a.id), budget } });
  expect(res.status).toBe(201);
  const sessionId = res.body.session.id as string;
  const stream = await openSse(`${t.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': alice.apiKey } });
  expect(stream.status).toBe(200);
  return { sessionId, stream };
}
const turnOn = (sessionId: string, interval: number) =>
  t.rest('PATCH', `/v2/sessions/${sessionId}`, { key: alice.apiKey, body: { autonomy_settings: on(interval) } });
const stopped = (stream: SseClient) => stream.waitFor((f) => f.data?.data?.type === 'autonomy_stopped');

describe('autonomy settings', () => {
  it('refuses auto-reply without a budget, in the original words, and creates nothing', async () => {
    const before = await sessionCount();
    for (const path of ['/v2/sessions', '/v2/sessions/create']) {
      const res = await t.rest('POST', path, {
        key: alice.apiKey,
        body: { agent_ids: [agents[0]!.id], content: 'Hello', autonomy_settings: on() },
      });
      expectError(res, 400, 'message', NEEDS_BUDGET);
    }
    expect(await sessionCount()).toBe(before);
  });

  // Which settings are refused is the sessions' rule (test/rules/sessions.test.ts, "what a prompt’s
  // input may be"); here, that REST names the nested field in its own spelling.
  it('names the field at fault in the nested settings', async () => {
    const res = await t.rest('POST', '/v2/sessions/create', {
      key: alice.apiKey,
      body: { agent_ids: [agents[0]!.id], budget: { turn_budget: 5 }, autonomy_settings: { ...on(), reply_interval: 3601 } },
    });
    expectError(res, 400, 'message', 'autonomy_settings.reply_interval: must be at most 3600');
  });

  it('are shown on the session, and changed by its owner alone with PATCH (which needs the budget too)', async () => {
    const created = await t.rest('POST', '/v2/sessions/create', {
      key: alice.apiKey,
      body: { agent_ids: [agents[0]!.id], autonomy_settings: { auto_reply: false, reply_interval: 30, actor_selection_method: 'random' } },
    });
    expect(created.status).toBe(201);
    const id = created.body.session.id as string;
    expect(created.body.session.autonomy_settings).toEqual({ auto_reply: false, reply_interval: 30, actor_selection_method: 'random' });
    // No budget on this session: turning auto-reply on is refused, and nothing changes.
    expectError(
      await t.rest('PATCH', `/v2/sessions/${id}`, { key: alice.apiKey, body: { autonomy_settings: on() } }),
      400,
      'error',
      NEEDS_BUDGET,
    );
    expectError(await t.rest('PATCH', `/v2/sessions/${id}`, { key: bob.apiKey, body: { autonomy_settings: on() } }), 404, 'error');
    const read = await t.rest('GET', `/v2/sessions/${id}`, { key: alice.apiKey });
    expect(read.body.session.autonomy_settings).toEqual({ auto_reply: false, reply_interval: 30, actor_selection_method: 'random' });
    const renamed = await t.rest('PATCH', `/v2/sessions/${id}`, {
      key: alice.apiKey,
      body: { autonomy_settings: { auto_reply: false, reply_interval: 5, actor_selection_method: 'random_exclude_last' } },
    });
    expect(renamed.body).toEqual({ success: true });
    const after = await t.rest('GET', `/v2/sessions/${id}`, { key: alice.apiKey });
    expect(after.body.session.autonomy_settings).toEqual({
      auto_reply: false,
      reply_interval: 5,
      actor_selection_method: 'random_exclude_last',
    });
    expect(after.body.session.title).toBeNull();
  });
});

describe('an autonomous session', () => {
  it('takes turns, the agents alternating, each a streamed reply to the conversation so far, until its turn budget stops it', async () => {
    const requestsBefore = llm.requests.length;
    const { sessionId, stream } = await watchedSession({ turn_budget: 4 });
    // A prompt that turns autonomy on as it is sent.
    const res = await t.rest('POST', '/v2/sessions', {
      key: alice.apiKey,
      body: { session_id: sessionId, content: 'Discuss the tides', autonomy_settings: on(0) },
    });
    expect(res.status).toBe(200);
    const stop = await stopped(stream);
    stream.close();
    expect(stop.data.data).toEqual({
      type: 'autonomy_stopped',
      session_id: sessionId,
      reason: 'turn_budget',
      detail: 'Session turn budget exceeded',
    });

    // The prompt took one turn (Ada answered it); three autonomous turns followed, no two by the same agent in a row.
    const turns = updates(stream.frames, 'autonomous_turn');
    expect(turns).toHaveLength(3);
    const read = await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey });
    const replies = read.body.messages.filter((m: { role: string }) => m.role === 'assistant');
    expect(replies.map((m: { status: string; content: string }) => [m.status, m.content])).toEqual(
      Array.from({ length: 4 }, () => ['complete', 'Well, indeed.']),
    );
    const speakers = replies.map((m: { sender_id: string }) => m.sender_id);
    for (let i = 1; i < speakers.length; i++) expect(speakers[i]).not.toBe(speakers[i - 1]);
    // Each turn streamed under its own id, and is its own prompt.
    for (const turn of turns) {
      expect(
        updates(stream.frames, 'assistant_token')
          .filter((e) => e.prompt_id === turn.prompt_id)
          .map((e) => e.text),
      ).toEqual(['Well', ', ', 'indeed', '.']);
      expect(turn.reply_id).toBe(turn.prompt_id);
      expect(replies.find((m: { id: string }) => m.id === turn.reply_id)).toMatchObject({
        prompt_id: turn.reply_id,
        sender_id: turn.agent,
      });
    }
    // A turn is asked with the conversation so far: the last one saw the prompt and the replies before it.
    const asked = llm.requests.slice(requestsBefore).filter((r) => r.body.messages.some((m) => m.content?.includes('Discuss the tides')));
    expect(asked.at(-1)!.body.messages.filter((m) => m.content?.includes('Well, indeed.'))).toHaveLength(3);
    expect(read.body.session.budget).toMatchObject({ turn_budget: 4, turns_spent: 4 });
    expect(read.body.session.autonomy_settings).toEqual({ ...on(0), auto_reply: false });
    expect(await t.services.jobs.waiting(TURN_QUEUE, sessionId)).toBe(false);
  });

  it('stops when its owner cancels, and says why', async () => {
    const { sessionId, stream } = await watchedSession({ turn_budget: 50 });
    expect((await turnOn(sessionId, 60)).status).toBe(200);
    // A new session with no message: an agent opens the conversation; the next turn waits 60 s.
    await stream.waitFor((f) => f.data?.data?.type === 'end_prompt');
    await until('the next turn to wait', () => t.services.jobs.waiting(TURN_QUEUE, sessionId));
    const cancel = await t.rest('POST', `/v2/sessions/${sessionId}/cancel`, { key: alice.apiKey, body: {} });
    expect(cancel.status).toBe(200);
    const stop = await stopped(stream);
    stream.close();
    expect(stop.data.data).toMatchObject({ reason: 'turned_off' });
    expect(await t.services.jobs.waiting(TURN_QUEUE, sessionId)).toBe(false);
    const read = await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey });
    expect(read.body.session.autonomy_settings.auto_reply).toBe(false);
    expect(read.body.session.budget.turns_spent).toBe(1);
  });

  it('lets a person write in between: the loop goes on from their message, never two replies at once', async () => {
    const { sessionId, stream } = await watchedSession({ turn_budget: 4 });
    expect((await turnOn(sessionId, 2)).status).toBe(200);
    await stream.waitFor((f) => f.data?.data?.type === 'end_prompt');
    const prompt = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: 'And the moon?' } });
    expect(prompt.status).toBe(200);
    await stopped(stream);
    stream.close();
    // Replies never overlap: each starts after the one before it ended.
    const order = stream.frames
      .map((f) => f.data?.data)
      .filter((e) => e && ['start_prompt', 'autonomous_turn', 'end_prompt'].includes(e.type))
      .map((e) => e.type);
    expect(order.filter((type) => type !== 'end_prompt')).toHaveLength(4);
    expect(order).toEqual(order.map((_, i) => (i % 2 ? 'end_prompt' : expect.stringMatching(/^(start_prompt|autonomous_turn)$/))));
    expect(order.filter((type) => type === 'start_prompt')).toHaveLength(1);
    // The turn after the person's message was asked with it.
    const lastTurn = updates(stream.frames, 'autonomous_turn').at(-1)!;
    const turnRequest = llm.requests.findLast((r) => r.body.messages.some((m) => m.content?.includes('And the moon?')));
    expect(turnRequest).toBeDefined();
    const read = await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey });
    expect(read.body.messages.at(-1).id).toBe(lastTurn.reply_id);
    expect(read.body.session.budget.turns_spent).toBe(4);
  });
});

/** A new session of the makers with this budget, its loop turned on, run until it stops; the stop and the session as it ends. */
async function runToStop(budget: Record<string, number>) {
  const created = await t.rest('POST', '/v2/sessions/create', { key: alice.apiKey, body: { agent_ids: makers.map((a) => a.id), budget } });
  expect(created.status).toBe(201);
  const sessionId = created.body.session.id as string;
  const stream = await openSse(`${t.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': alice.apiKey } });
  const on = await t.rest('PATCH', `/v2/sessions/${sessionId}`, {
    key: alice.apiKey,
    body: { autonomy_settings: { auto_reply: true, reply_interval: 0, actor_selection_method: 'random' } },
  });
  expect(on.status).toBe(200);
  const stop = await stream.waitFor((f) => f.data?.data?.type === 'autonomy_stopped');
  stream.close();
  const read = await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey });
  const replies = read.body.messages.filter((m: { role: string }) => m.role === 'assistant');
  expect(await t.services.jobs.waiting(TURN_QUEUE, sessionId)).toBe(false);
  expect(read.body.session.autonomy_settings.auto_reply).toBe(false);
  return { sessionId, stop: stop.data.data, session: read.body.session, replies };
}

const balanceOf = async () => Number((await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).body.balance);

describe('an autonomous loop and its budgets', () => {
  beforeEach(() => {
    llm.reset();
    svc.reset();
  });

  it('stops once its tokens are spent, overspent by no more than the last turn', async () => {
    const perTurn = { prompt_tokens: 300, completion_tokens: 100 };
    llm.setDefault({ tokens: ['Hm.'], usage: perTurn });
    const { stop, session, replies } = await runToStop({ token_budget: 1000, turn_budget: 20 });
    expect(stop).toMatchObject({ reason: 'token_budget', detail: 'Session token budget exceeded' });
    // 400 tokens a turn: after three turns 1,200 are spent, and no fourth starts.
    expect(replies.map((m: { status: string }) => m.status)).toEqual(['complete', 'complete', 'complete']);
    expect(session.budget).toMatchObject({ token_budget: 1000, tokens_spent: 1200, turns_spent: 3 });
    expect(session.budget.tokens_spent - session.budget.token_budget).toBeLessThan(perTurn.prompt_tokens + perTurn.completion_tokens);
  });

  it('stops once its manna is spent, paid by the owner, the ledger agreeing with the balance', async () => {
    // Each turn calls the tool once, then answers with what it made.
    let calls = 0;
    llm.choose((r) =>
      r.body.messages.at(-1)?.role === 'tool'
        ? { tokens: ['Made.'] }
        : { toolCalls: [{ id: `call_${++calls}`, name: 'maker', arguments: JSON.stringify({ prompt: 'a kite' }) }] },
    );
    const before = await balanceOf();
    const ledgerBefore = await t.db.mannaLedger.count({ where: { userId: alice.id } });
    const { sessionId, stop, session, replies } = await runToStop({ manna_budget: 100, turn_budget: 20 });
    expect(stop).toMatchObject({ reason: 'manna_budget', detail: 'Session manna budget exceeded' });
    // 50 manna a turn: the second turn's tool spends the budget exactly, so the model's call after
    // it is refused (that reply fails on the budget, as any reply does) and no third turn starts.
    expect(replies.map((m: { status: string; content: string; error: string | null }) => [m.status, m.content, m.error])).toEqual([
      ['complete', 'Made.', null],
      ['failed', '', 'Session manna budget exceeded'],
    ]);
    expect(svc.calls).toHaveLength(2);
    expect(session.budget).toMatchObject({ manna_budget: 100, manna_spent: 100 });
    expect(await balanceOf()).toBe(before - 2 * MAKER_COST);
    const rows = await t.db.mannaLedger.findMany({ where: { userId: alice.id }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
    const moved = rows.slice(ledgerBefore);
    expect(moved.every((row) => row.sessionId === sessionId)).toBe(true);
    expect(moved.reduce((sum, row) => sum + row.amount.toNumber(), 0)).toBe(-2 * MAKER_COST);
    expect(rows.at(-1)!.balanceAfter.toNumber()).toBe(before - 2 * MAKER_COST);
  });
});
