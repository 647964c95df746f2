import { expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { type FakeTelegram, startFakeTelegram } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts';

// Webhook events written where the service stops something on its own: a deployment whose token
// the platform refused or whose daily manna cap is reached (fake Telegram), and an autonomous
// loop that spent its turn budget or whose turn failed (the real job queue, the fake model). A
// real receiver verifies each with standardwebhooks.

let t: TestApp;
let tg: FakeTelegram;
let llm: FakeOpenAI;
let alice: TestUser;
let receiver: Receiver;
let secret: string;

setUp(async (start) => {
  receiver = await start.service(startReceiver());
  tg = await start.service(startFakeTelegram());
  llm = await start.fakeOpenAI({ tokens: ['Go', ' on.'] });
  t = await start.app({
    llm: { baseUrl: llm.baseUrl },
    outbound: { allowHttp: true, allowPrivate: true },
    webhooks: { sweepMs: 100 },
    jobs: { pollMs: 500 },
    deployments: { leaseMs: 1_500, telegram: { apiUrl: tg.apiUrl, pollTimeoutS: 1 } },
  });
  alice = await t.createUser('alice');
  const made = await t.rest('POST', '/v2/webhooks', {
    key: alice.apiKey,
    body: { url: receiver.url, event_types: ['deployment.stopped', 'autonomy.stopped'] },
  });
  expect(made.status).toBe(201);
  secret = made.body.secret;
});

/** A deployment as `GET /v2/agents/deployments` shows it. */
const shownDeployment = async (id: string) =>
  (await t.rest('GET', '/v2/agents/deployments', { key: alice.apiKey })).body.deployments.find((d: { id: string }) => d.id === id);
/** A session as `GET /v2/sessions/{id}` shows it, without the page of its messages beside it. */
const shownSession = async (id: string) => {
  const { messages: _page, ...session } = (await t.rest('GET', `/v2/sessions/${id}`, { key: alice.apiKey })).body.session;
  return session;
};

/** The events of `type` the receiver got, verified. */
const heard = (type: string) => receiver.received.map((r) => receiver.verify(r, secret)).filter((e) => e.type === type);

it('tells the owner a deployment stopped because the platform refused its token, with why', async () => {
  const agent = await fixtures(t).agent(alice, { public: false });
  const token = tg.addBot();
  const deployed = await t.rest('POST', `/v2/agents/${agent.id}/deployments`, {
    key: alice.apiKey,
    body: { platform: 'telegram', secrets: { telegram: { token } } },
  });
  expect(deployed.status).toBe(200);
  await tg.until(() => tg.polling(token).now === 1, 20_000, 'the deployment to poll');
  tg.revoke(token);
  await expect.poll(() => heard('deployment.stopped'), { timeout: 20_000 }).toHaveLength(1);
  expect(heard('deployment.stopped')[0]!.data).toEqual({
    deployment_id: deployed.body.deploymentId,
    agent_id: agent.id,
    platform: 'telegram',
    reason: 'secrets_refused',
    detail: 'Telegram refused the bot token (it was revoked or changed)',
    deployment: await shownDeployment(deployed.body.deploymentId),
  });
});

it('tells the owner an autonomous loop stopped on its turn budget, and not when the owner turned it off', async () => {
  const agent = await fixtures(t).agent(alice);
  const on = { auto_reply: true, reply_interval: 0, actor_selection_method: 'random' };
  const spent = await t.rest('POST', '/v2/sessions/create', {
    key: alice.apiKey,
    body: { agent_ids: [agent.id], budget: { turn_budget: 2 }, autonomy_settings: on },
  });
  expect(spent.status).toBe(201);
  const sessionId = spent.body.session.id;
  await expect.poll(() => heard('autonomy.stopped'), { timeout: 30_000 }).toHaveLength(1);
  expect(heard('autonomy.stopped')[0]!.data).toMatchObject({ session_id: sessionId, reason: 'turn_budget' });
  expect(heard('autonomy.stopped')[0]!.data.session).toEqual(await shownSession(sessionId));

  const owned = await t.rest('POST', '/v2/sessions/create', {
    key: alice.apiKey,
    body: { agent_ids: [agent.id], budget: { turn_budget: 1000 }, autonomy_settings: { ...on, reply_interval: 3600 } },
  });
  const off = await t.rest('PATCH', `/v2/sessions/${owned.body.session.id}`, {
    key: alice.apiKey,
    body: { autonomy_settings: { ...on, auto_reply: false } },
  });
  expect(off.status, JSON.stringify(off.body)).toBe(200);
  // An event is written in the transaction of the stop it reports, so the log would show it at once.
  const hook = (await t.rest('GET', '/v2/webhooks', { key: alice.apiKey })).body.webhooks[0].id;
  const log = (await t.rest('GET', `/v2/webhooks/${hook}/deliveries`, { key: alice.apiKey })).body.deliveries;
  expect(log.filter((d: { event_type: string }) => d.event_type === 'autonomy.stopped')).toHaveLength(1);
  expect(heard('autonomy.stopped').map((e) => e.data.session_id)).toEqual([sessionId]);
});

it('tells the owner once a deployment stopped answering because its daily manna cap is reached, however many chats meet it', async () => {
  const agent = await fixtures(t).agent(alice, { public: false });
  const token = tg.addBot();
  const deployed = await t.rest('POST', `/v2/agents/${agent.id}/deployments`, {
    key: alice.apiKey,
    body: { platform: 'telegram', secrets: { telegram: { token } }, config: { daily_manna_cap: 0 } },
  });
  expect(deployed.status).toBe(200);
  await tg.until(() => tg.polling(token).now === 1, 20_000, 'the deployment to poll');
  const chats = [8101, 8102].map((id) => ({ id, type: 'private' as const, first_name: `Stranger ${id}` }));
  const asked = chats.map((chat) => tg.message(token, chat, { id: chat.id, first_name: chat.first_name }, 'hello?'));
  await tg.until(() => chats.every((chat, i) => tg.answersTo(chat.id, asked[i]!).length === 1), 20_000, 'both chats told of the cap');
  await expect.poll(() => heard('deployment.stopped').filter((e) => e.data.reason === 'cap'), { timeout: 20_000 }).toHaveLength(1);
  expect(heard('deployment.stopped').find((e) => e.data.reason === 'cap')!.data).toEqual({
    deployment_id: deployed.body.deploymentId,
    agent_id: agent.id,
    platform: 'telegram',
    reason: 'cap',
    detail: 'Its daily manna cap is reached: it answers again after midnight (UTC)',
    deployment: await shownDeployment(deployed.body.deploymentId),
  });
  // The log says the same: one event for the day, though two chats met the cap.
  const hook = (await t.rest('GET', '/v2/webhooks', { key: alice.apiKey })).body.webhooks[0].id;
  const log = (await t.rest('GET', `/v2/webhooks/${hook}/deliveries`, { key: alice.apiKey })).body.deliveries;
  const capped = log.filter((d: { event_id: string }) =>
    receiver.received.some((r) => r.id === d.event_id && receiver.verify(r, secret).data.reason === 'cap'),
  );
  expect(capped).toHaveLength(1);
});

it('tells the owner an autonomous loop stopped because a turn failed', async () => {
  const agent = await fixtures(t).agent(alice);
  llm.setDefault({ status: 500 });
  try {
    const made = await t.rest('POST', '/v2/sessions/create', {
      key: alice.apiKey,
      body: {
        agent_ids: [agent.id],
        budget: { turn_budget: 10 },
        autonomy_settings: { auto_reply: true, reply_interval: 0, actor_selection_method: 'random' },
      },
    });
    expect(made.status).toBe(201);
    const sessionId = made.body.session.id;
    await expect.poll(() => heard('autonomy.stopped').filter((e) => e.data.session_id === sessionId), { timeout: 30_000 }).toHaveLength(1);
    expect(heard('autonomy.stopped').find((e) => e.data.session_id === sessionId)!.data).toEqual({
      session_id: sessionId,
      reason: 'reply_failed',
      detail: 'A turn failed',
      session: await shownSession(sessionId),
    });
  } finally {
    llm.reset();
  }
});
