import { beforeEach, describe, expect, it } from 'vitest';
import { TURN_QUEUE } from '../../src/domain/autonomy/index.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';

// An autonomous loop stopped by its token and manna budgets, on the real app, its job queue, the
// fake model and a real HTTP tool: each stop says which budget, the budget is overspent by no more
// than the turn under way, and the manna the turns spent is the owner's, each move a ledger row.

const MAKER_COST = 50;

let t: TestApp;
let llm: FakeOpenAI;
let svc: Awaited<ReturnType<typeof startFakeToolService>>;
let alice: TestUser;
let agents: { id: string }[];

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Hm.'] });
  svc = await start.service(startFakeToolService());
  const toolsDir = await toolRegistryWith({ maker: httpTool('maker', svc.url, `${MAKER_COST} * n`) });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, toolsDir, jobs: { pollMs: 500, superviseS: 1 } });
  alice = await t.createUser('alice');
  await t.services.manna.grant('alice', '400', 'forever');
  const f = fixtures(t);
  agents = [await f.agent(alice, { name: 'Ada', tools: { maker: true } }), await f.agent(alice, { name: 'Bo', tools: { maker: true } })];
});
beforeEach(() => {
  llm.reset();
  svc.reset();
});

/** A new session of Ada and Bo with this budget, its loop turned on, run until it stops; the stop and the session as it ends. */
async function runToStop(budget: Record<string, number>) {
  const created = await t.rest('POST', '/v2/sessions/create', { key: alice.apiKey, body: { agent_ids: agents.map((a) => a.id), budget } });
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
