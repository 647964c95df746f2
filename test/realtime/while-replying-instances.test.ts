import { beforeEach, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI, RecordedRequest } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { startRedis } from '../helpers/redis.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { until } from '../helpers/until.ts';

/**
 * A prompt while an agent replies, when the reply is written by another instance: two instances
 * over one PostgreSQL and one Redis. The prompt goes to b while a writes the reply; whatever it
 * says holds there as it does on one instance, and so does a burst spread over both.
 */
let llm: FakeOpenAI;
let a: TestApp;
let b: TestApp;
let alice: TestUser;
let agentId: string;

setUp(async (start) => {
  const [redis, database] = await Promise.all([start.service(startRedis()), start.service(freshPostgresDatabase(), (d) => d.drop())]);
  llm = await start.fakeOpenAI({ tokens: ['Done.'] });
  const config = { redisUrl: redis.url, llm: { baseUrl: llm.baseUrl } };
  // One after the other: the first applies the migrations.
  a = await start.app(config, { kind: 'postgres', url: database.url });
  b = await start.app(config, { kind: 'postgres', url: database.url });
  alice = await a.createUser('alice');
  agentId = (await fixtures(a).agent(alice, { name: 'Ada' })).id;
});
beforeEach(() => llm.reset());

const asks = (r: RecordedRequest, text: string) => r.body.messages.at(-1)?.content === text;

/** A session whose first reply, written by `a`, has streamed "Partial" and is held by the model. */
async function replyUnderWayOnA() {
  llm.choose((r) => (asks(r, 'first') ? { tokens: ['Partial', ' rest'], stallAfter: 1 } : undefined));
  const sent = await a.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [agentId], content: 'first' } });
  const sessionId = sent.body.session_id as string;
  const reply = await until('the reply to stream', () =>
    a.db.message.findFirst({ where: { sessionId, role: 'assistant', content: { startsWith: 'Partial' } } }),
  );
  expect(reply.instance).toBe(a.services.replies.instanceId);
  return { sessionId, replyId: reply.id };
}

const sendTo = (app: TestApp, sessionId: string, content: string, whileReplying?: string) =>
  app.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content, while_replying: whileReplying } });

const replies = async (sessionId: string) =>
  (await settledSession(b, alice, sessionId, '?limit=100')).messages.filter((m: { role: string }) => m.role === 'assistant') as {
    id: string;
    status: string;
    content: string;
  }[];

it('interrupt on b stops the reply a writes, kept as interrupted; b answers with it in context', async () => {
  const { sessionId, replyId } = await replyUnderWayOnA();
  expect((await sendTo(b, sessionId, 'second', 'interrupt')).status).toBe(200);
  const written = await replies(sessionId);
  expect(written.map((m) => [m.id === replyId, m.status, m.content])).toEqual([
    [true, 'interrupted', 'Partial'],
    [false, 'complete', 'Done.'],
  ]);
  expect(
    llm
      .replyRequests()
      .at(-1)!
      .body.messages.some((m) => m.content === 'Partial [interrupted]'),
  ).toBe(true);
});

it('rollback on b removes the reply a writes; enqueue on b waits for it', async () => {
  const first = await replyUnderWayOnA();
  expect((await sendTo(b, first.sessionId, 'second', 'rollback')).status).toBe(200);
  expect((await replies(first.sessionId)).map((m) => [m.status, m.content])).toEqual([['complete', 'Done.']]);
  expect(await b.db.message.findUnique({ where: { id: first.replyId } })).toBeNull();

  llm.reset();
  const held = await replyUnderWayOnA();
  expect((await sendTo(b, held.sessionId, 'second', 'reject')).status).toBe(409);
  expect((await sendTo(b, held.sessionId, 'second')).status).toBe(200);
  // Waiting on b for a's reply: the model has not been asked for the second.
  expect(llm.replyRequests().filter((r) => asks(r, 'second'))).toHaveLength(0);
  await a.rest('POST', `/v2/sessions/${held.sessionId}/cancel`, { key: alice.apiKey });
  const written = await replies(held.sessionId);
  // The cancel stops every reply of the session, the one waiting on b too.
  expect(written.map((m) => m.status)).toEqual(['cancelled', 'cancelled']);
});

it('twenty interrupts at once, spread over both instances, while a writes a reply: exactly one reply survives', async () => {
  const { sessionId } = await replyUnderWayOnA();
  const sent = await Promise.all(Array.from({ length: 20 }, (_, i) => sendTo(i % 2 ? a : b, sessionId, `burst ${i}`, 'interrupt')));
  expect(sent.map((r) => r.status)).toEqual(Array(20).fill(200));
  const written = await replies(sessionId);
  expect(written).toHaveLength(21);
  expect(written.filter((m) => m.status === 'interrupted')).toHaveLength(20);
  expect(written.at(-1)).toMatchObject({ status: 'complete', content: 'Done.' });
});
