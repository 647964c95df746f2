import { expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { startRedis } from '../helpers/redis.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse } from '../helpers/sse.ts';
import { toolRegistryWith, httpTool } from '../helpers/tool-registry.ts';

/**
 * A reply paused for approval on one instance goes on on another: two instances over one
 * PostgreSQL and one Redis; the reply pauses on a, a stops, the payer answers on b, and b (the
 * only one left to take the job) runs the tool and finishes the reply.
 */
let llm: FakeOpenAI;
let svc: Awaited<ReturnType<typeof startFakeToolService>>;
let a: TestApp;
let b: TestApp;
let alice: TestUser;
let agentId: string;

setUp(async (start) => {
  const [redis, database] = await Promise.all([start.service(startRedis()), start.service(freshPostgresDatabase(), (d) => d.drop())]);
  llm = await start.fakeOpenAI({ tokens: ['Done.'] });
  svc = await start.service(startFakeToolService({ answer: { result: { made: 'a boat' } } }));
  const toolsDir = await toolRegistryWith({ remote_maker: httpTool('remote_maker', svc.url) });
  const config = { redisUrl: redis.url, llm: { baseUrl: llm.baseUrl }, toolsDir };
  // One after the other: the first applies the migrations.
  a = await start.app(config, { kind: 'postgres', url: database.url });
  b = await start.app(config, { kind: 'postgres', url: database.url });
  alice = await a.createUser('alice');
  await a.services.manna.grant('alice', '10', 'forever');
  agentId = (
    await fixtures(a).agent(alice, { name: 'Ada', tools: { remote_maker: true }, toolApproval: { tools: { remote_maker: 'always' } } })
  ).id;
});

it('paused on a, approved on b with a gone: b runs the tool once, charged, and finishes the reply', async () => {
  llm.choose((r) => {
    const last = r.body.messages.at(-1);
    if (last?.role === 'user' && last.content === 'build a boat')
      return { tokens: ['Sawing.'], toolCalls: [{ id: 'call_1', name: 'remote_maker', arguments: '{"prompt":"a boat","n":2}' }] };
    if (last?.role === 'tool') return { tokens: [' Afloat.'] };
    return undefined;
  });
  // The prompt's own stream on a: its tool_approval_requested comes once the pause is saved,
  // not only the call marked (a closed between the two would end the reply as any shutdown does).
  const watch = await openSse(`${a.url}/v2/sessions`, {
    method: 'POST',
    headers: { 'x-api-key': alice.apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ stream: true, agent_ids: [agentId], content: 'build a boat' }),
  });
  const requested = (await watch.waitFor((f) => f.data?.data?.type === 'tool_approval_requested')).data.data;
  watch.close();
  const sessionId = requested.session_id as string;
  const call = { id: requested.tool_call.id as string };
  await a.close();

  const approved = await b.rest('POST', `/v2/sessions/${sessionId}/approvals/${call.id}`, { key: alice.apiKey, body: { approve: true } });
  expect(approved.status, JSON.stringify(approved.body)).toBe(200);
  const reply = (await settledSession(b, alice, sessionId)).messages.at(-1);
  expect(reply).toMatchObject({ status: 'complete', content: 'Sawing. Afloat.' });
  expect(reply.tool_calls).toEqual([expect.objectContaining({ id: call.id, status: 'completed', cost: 2 })]);
  expect((await b.db.message.findUniqueOrThrow({ where: { id: reply.id } })).instance).toBe(b.services.replies.instanceId);
  expect(svc.calls).toHaveLength(1);
  const user = await b.db.user.findUniqueOrThrow({ where: { id: alice.id } });
  const ledger = await b.db.mannaLedger.findMany({ where: { userId: alice.id } });
  expect(ledger.reduce((s, r) => s + r.amount.toNumber(), 0)).toBe(user.foreverBalance.toNumber() + user.subscriptionBalance.toNumber());
  expect(user.foreverBalance.toNumber()).toBe(8);
});
