import { expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { startRedis } from '../helpers/redis.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse } from '../helpers/sse.ts';
import { until } from '../helpers/until.ts';

/**
 * Two instances over one PostgreSQL and one Redis, both working the queue of autonomous turns:
 * each turn of a session is taken by one of them, once, one at a time, and watchers on either
 * see every turn. When one instance stops mid-loop, the other carries it to its end.
 */
const TURNS = 10;
let llm: FakeOpenAI;
let a: TestApp;
let b: TestApp;
let alice: TestUser;
let agentIds: string[];

setUp(async (start) => {
  const [redis, database] = await Promise.all([start.service(startRedis()), start.service(freshPostgresDatabase(), (d) => d.drop())]);
  llm = await start.fakeOpenAI({ tokens: ['Your', ' turn', '.'], delayMs: 20 });
  const config = { redisUrl: redis.url, llm: { baseUrl: llm.baseUrl }, jobs: { pollMs: 500, superviseS: 1 } };
  // One after the other: the first applies the migrations.
  a = await start.app(config, { kind: 'postgres', url: database.url });
  b = await start.app(config, { kind: 'postgres', url: database.url });
  alice = await a.createUser('alice');
  const f = fixtures(a);
  agentIds = [(await f.agent(alice, { name: 'Ada' })).id, (await f.agent(alice, { name: 'Bo' })).id];
});

it('takes each turn once, on one instance or the other, and the other carries on when one stops', async () => {
  const created = await a.rest('POST', '/v2/sessions/create', {
    key: alice.apiKey,
    body: { agent_ids: agentIds, budget: { turn_budget: TURNS } },
  });
  const sessionId = created.body.session.id as string;
  // Watched on b, turned on through a.
  const watch = await openSse(`${b.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': alice.apiKey } });
  const on = await a.rest('PATCH', `/v2/sessions/${sessionId}`, {
    key: alice.apiKey,
    body: { autonomy_settings: { auto_reply: true, reply_interval: 0, actor_selection_method: 'random' } },
  });
  expect(on.status).toBe(200);
  const turns = () => watch.frames.filter((f) => f.data?.data?.type === 'autonomous_turn').length;
  await until('three turns', () => turns() >= 3);
  await a.close();
  const stop = await watch.waitFor((f) => f.data?.data?.type === 'autonomy_stopped');
  watch.close();
  expect(stop.data.data).toMatchObject({ reason: 'turn_budget' });

  const replies = await b.db.message.findMany({ where: { sessionId, role: 'assistant' }, orderBy: { ordinal: 'asc' } });
  expect(replies).toHaveLength(TURNS);
  expect(replies.every((m) => m.status === 'complete' && m.content === 'Your turn.')).toBe(true);
  expect(turns()).toBe(TURNS);
  // Each turn asked the model once: no turn ran twice, on the same instance or on both.
  expect(llm.requests).toHaveLength(TURNS);
  // One at a time: each reply was started after the one before it was saved.
  for (let i = 1; i < replies.length; i++)
    expect(replies[i]!.createdAt.getTime()).toBeGreaterThanOrEqual(replies[i - 1]!.updatedAt.getTime());
  // b took the turns after a stopped (a may have taken some before).
  const instances = new Set(replies.map((m) => m.instance));
  expect(instances).toContain(b.services.replies.instanceId);
  expect([...instances].every((i) => i === a.services.replies.instanceId || i === b.services.replies.instanceId)).toBe(true);
  const session = await b.db.session.findUniqueOrThrow({ where: { id: sessionId } });
  expect({ turns: session.turnsSpent, autoReply: session.autoReply }).toEqual({ turns: TURNS, autoReply: false });
});
