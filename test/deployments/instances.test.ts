import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { credit } from '../../src/domain/manna/stores/ledger.ts';
import type { ConfigOverrides, TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI, RecordedRequest } from '../helpers/fake-openai.ts';
import { type FakeTelegram, startFakeTelegram, type TgChat } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { startRedis } from '../helpers/redis.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * Two instances of the service over one PostgreSQL and one Redis, as behind a load balancer:
 * deploys of one agent (and of one bot to two agents) arriving at both at once leave one
 * deployment, whole, polled by one of them; and the daily manna cap holds while one instance
 * answers strangers in the chats and the owner prompts the same chats' sessions through the other.
 */
let a: TestApp;
let b: TestApp;
let tg: FakeTelegram;
let llm: FakeOpenAI;
let alice: TestUser;

const said = (r: RecordedRequest) => String(r.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '');

setUp(async (start) => {
  const [redis, database] = await Promise.all([start.service(startRedis()), start.service(freshPostgresDatabase(), (d) => d.drop())]);
  tg = await start.service(startFakeTelegram());
  llm = await start.fakeOpenAI({ tokens: ['OK', '.'] });
  llm.choose((r) => {
    const text = said(r);
    if (!text.includes('paint')) return { tokens: ['Heard', ': ', text] };
    if (r.body.messages.some((m) => m.role === 'tool')) return { tokens: ['Painted', '.'] };
    return { toolCalls: [1, 2].map((n) => ({ id: `call_${n}`, name: 'flux_dev', arguments: `{"prompt":"a harbour, take ${n}"}` })) };
  });
  const config: ConfigOverrides = {
    redisUrl: redis.url,
    // Both seal with the same key, as SECRETS_KEY on every instance makes them.
    secrets: { key: randomBytes(32), previous: [], keyFile: undefined, shared: true },
    llm: { baseUrl: llm.baseUrl },
    deployments: { leaseMs: 1_500, telegram: { apiUrl: tg.apiUrl, pollTimeoutS: 1 } },
  };
  // One after the other: the first applies the migrations.
  a = await start.app(config, { kind: 'postgres', url: database.url });
  b = await start.app(config, { kind: 'postgres', url: database.url });
  alice = await a.createUser('alice');
  await a.db.$transaction((tx) => credit(tx, { userId: alice.id, kind: 'forever', amount: '100', reason: 'purchase' }));
});

const deploy = (t: TestApp, agentId: string, body: Record<string, unknown>) =>
  t.rest('POST', `/v2/agents/${agentId}/deployments`, { key: alice.apiKey, body: { platform: 'telegram', ...body } });

describe('deployments on two instances', () => {
  it('deploys of one agent arriving at both at once leave one deployment, polled once, that answers', async () => {
    const agent = await fixtures(a).agent(alice, { public: false });
    const token = tg.addBot();
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => deploy(i % 2 ? a : b, agent.id, { secrets: { telegram: { token } } })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(new Set(results.map((r) => r.body.deploymentId)).size).toBe(1);
    expect(await a.db.deployment.count({ where: { agentId: agent.id } })).toBe(1);
    const chat: TgChat = { id: 8101, type: 'private', first_name: 'Ann' };
    const asked = tg.message(token, chat, { id: 8101, first_name: 'Ann' }, 'hello both');
    await tg.until(() => tg.answersTo(chat.id, asked)[0]?.text === 'Heard: hello both', 20_000, 'the answer');
    const [row] = await a.db.deployment.findMany({ where: { agentId: agent.id } });
    expect([row!.running, row!.lastError]).toEqual([true, null]);
    expect(tg.polling(token)).toMatchObject({ max: 1, conflicts: 0 });
  });

  it('one bot deployed to two agents through both instances at once: one is running it, the other is told where', async () => {
    const [x, y] = await Promise.all([fixtures(a).agent(alice, { public: false }), fixtures(a).agent(alice, { public: false })]);
    const token = tg.addBot();
    const [onA, onB] = await Promise.all([
      deploy(a, x.id, { secrets: { telegram: { token } } }),
      deploy(b, y.id, { secrets: { telegram: { token } } }),
    ]);
    expect([onA.status, onB.status].sort()).toEqual([200, 409]);
    const [won, lost] = onA.status === 200 ? [x, y] : [y, x];
    expect((onA.status === 409 ? onA : onB).body.error).toMatch(new RegExp(`is already deployed to your agent "[^"]+" \\(${won.id}\\)`));
    expect(await a.db.deployment.count({ where: { agentId: lost.id } })).toBe(0);
    await tg.until(() => tg.polling(token).now === 1, 20_000, 'the bot to be polled');
  });
});

describe('the daily manna cap on two instances', () => {
  it('holds while strangers write in the chats (one instance answers) and the owner prompts their sessions through the other', async () => {
    const agent = await fixtures(a).agent(alice, { public: false, tools: { flux_dev: true } });
    const token = tg.addBot();
    const made = await deploy(a, agent.id, { secrets: { telegram: { token } } });
    expect(made.status).toBe(200);
    const chats = [8201, 8202, 8203].map((id): TgChat => ({ id, type: 'private', first_name: `Stranger ${id}` }));
    const from = (chat: TgChat) => ({ id: chat.id, first_name: chat.first_name! });
    // Each chat first says hello (no tool, nothing spent), so that each has its session.
    const hellos = chats.map((chat) => [chat, tg.message(token, chat, from(chat), 'hello')] as const);
    for (const [chat, id] of hellos) await tg.until(() => tg.answersTo(chat.id, id)[0]?.text === 'Heard: hello', 20_000, 'hello');
    const sessions = await a.db.deploymentChat.findMany({ where: { deploymentId: made.body.deploymentId }, select: { sessionId: true } });
    expect(sessions).toHaveLength(3);
    const patched = await b.rest('PATCH', `/v2/agents/${agent.id}/deployments`, {
      key: alice.apiKey,
      body: { platform: 'telegram', config: { daily_manna_cap: 1 } },
    });
    expect(patched.status).toBe(200);

    const balance = async () => Number((await a.db.user.findUniqueOrThrow({ where: { id: alice.id } })).foreverBalance);
    const before = await balance();
    for (const chat of chats) tg.message(token, chat, from(chat), 'please paint');
    const prompts = await Promise.all(
      sessions.flatMap(({ sessionId }) =>
        [a, b].map((t) => t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: 'please paint' } })),
      ),
    );
    expect(prompts.map((p) => p.status)).toEqual(Array(6).fill(200));
    await expect
      .poll(
        async () => {
          const replies = await a.db.message.count({
            where: { sessionId: { in: sessions.map((s) => s.sessionId!) }, role: 'assistant', status: 'streaming' },
          });
          const received = await a.db.deploymentUpdate.count({ where: { deploymentId: made.body.deploymentId, status: 'received' } });
          const open = await a.db.task.count({ where: { userId: alice.id, status: { in: ['pending', 'running'] } } });
          return replies + received + open;
        },
        { timeout: 30_000 },
      )
      .toBe(0);
    expect(before - (await balance())).toBe(1);
    const charged = await a.db.task.findMany({ where: { userId: alice.id, status: 'completed' } });
    expect(charged.map((c) => c.cost?.toNumber())).toEqual([1]);
  });
});
