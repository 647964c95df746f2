import { readFileSync } from 'node:fs';
import { buildSchema } from 'graphql';
import { createClient as createSseClient } from 'graphql-sse';
import { afterAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients } from '../helpers/graphql-ws.ts';
import { newSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * What narrows a live feed is checked before anything is watched (docs/feeds.md): a stranger who
 * names another user's task, agent, trigger or session is refused as reading it would be, over
 * graphql-ws, GraphQL over SSE and REST alike, and no watch starts. Every subscription field and
 * event route that takes such an argument has its cases here; a new one without them fails the
 * first test.
 */
let t: TestApp;
let alice: TestUser;
let bob: TestUser;
const ws = graphqlWsClients(() => t.url);
const ids = { publicAgent: '', privateAgent: '', trigger: '', task: '', session: '', webhook: '' };
const UNKNOWN = '00000000-0000-7000-8000-000000000000';

setUp(async (start) => {
  t = await start.app({ limits: { maxSubscriptionsPerKey: 50 }, outbound: { allowHttp: true, allowPrivate: true } });
  [alice, bob] = [await t.createUser('alice'), await t.createUser('bob')];
  const f = fixtures(t);
  ids.publicAgent = (await f.agent(alice, { public: true })).id;
  ids.privateAgent = (await f.agent(alice, { public: false })).id;
  ids.trigger = (await f.trigger(ids.publicAgent, alice.id)).id;
  ids.task = (await t.db.task.create({ data: { userId: alice.id, tool: 'flux_dev', args: {}, cost: 1, status: 'completed' } })).id;
  ids.session = await newSession(t, alice, [ids.privateAgent]);
  ids.webhook = (
    await t.rest('POST', '/v2/webhooks', { key: alice.apiKey, body: { url: 'http://127.0.0.1:9/hook', event_types: ['webhook.test'] } })
  ).body.webhook.id;
});
afterAll(() => ws.disposeAll());

/** A subscription named with a stranger's argument, and what reading that thing tells them. */
const subscriptions: { field: string; arg: string; query: string; id: () => string; code: string; message: RegExp }[] = [
  ...(['publicAgent', 'privateAgent'] as const).flatMap((agent) => [
    {
      field: 'deploymentUpdates',
      arg: 'agentId',
      query: `subscription($id: ID) { deploymentUpdates(agentId: $id) { seq } }`,
      id: () => ids[agent],
      code: 'FORBIDDEN',
      message: /^Only the agent's owner can deploy it or change its deployments$/,
    },
    {
      field: 'triggerEvents',
      arg: 'agentId',
      query: `subscription($id: ID) { triggerEvents(agentId: $id) { seq } }`,
      id: () => ids[agent],
      code: 'FORBIDDEN',
      message: /^You do not have access to this agent$/,
    },
  ]),
  {
    field: 'deploymentUpdates',
    arg: 'agentId',
    query: `subscription($id: ID) { deploymentUpdates(agentId: $id) { seq } }`,
    id: () => UNKNOWN,
    code: 'NOT_FOUND',
    message: /^Agent not found$/,
  },
  {
    field: 'triggerEvents',
    arg: 'triggerId',
    query: `subscription($id: ID) { triggerEvents(triggerId: $id) { seq } }`,
    id: () => ids.trigger,
    code: 'NOT_FOUND',
    message: /^Trigger not found$/,
  },
  {
    field: 'taskUpdates',
    arg: 'taskId',
    query: `subscription($id: ID) { taskUpdates(taskId: $id) { seq } }`,
    id: () => ids.task,
    code: 'NOT_FOUND',
    message: /^Task not found$/,
  },
  {
    field: 'webhookUpdates',
    arg: 'webhookId',
    query: `subscription($id: ID) { webhookUpdates(webhookId: $id) { seq } }`,
    id: () => ids.webhook,
    code: 'NOT_FOUND',
    message: /^Webhook not found$/,
  },
  {
    field: 'sessionEvents',
    arg: 'sessionId',
    query: `subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }`,
    id: () => ids.session,
    code: 'FORBIDDEN',
    message: /./,
  },
];

/** The same through the REST event streams. */
const routes: { url: string; query: (id: string) => string; id: () => string; status: number; error: RegExp }[] = [
  { url: '/v2/agents/deployments/events', query: (id) => `agent_id=${id}`, id: () => ids.privateAgent, status: 401, error: /owner/ },
  { url: '/v2/agents/deployments/events', query: (id) => `agent_id=${id}`, id: () => ids.publicAgent, status: 401, error: /owner/ },
  { url: '/v2/agents/triggers/events', query: (id) => `agent_id=${id}`, id: () => ids.privateAgent, status: 401, error: /access/ },
  { url: '/v2/agents/triggers/events', query: (id) => `trigger_id=${id}`, id: () => ids.trigger, status: 404, error: /Trigger not found/ },
  { url: '/v2/tasks/events', query: (id) => `taskId=${id}`, id: () => ids.task, status: 404, error: /Task not found/ },
  { url: '/v2/webhooks/events', query: (id) => `webhook_id=${id}`, id: () => ids.webhook, status: 404, error: /Webhook not found/ },
];

describe("a feed narrowed by a stranger's argument", () => {
  it('has cases here for every subscription argument and event route that narrows a feed', () => {
    const schema = buildSchema(readFileSync(new URL('../../schema/schema.graphql', import.meta.url), 'utf8'));
    const narrowing = Object.values(schema.getSubscriptionType()!.getFields()).flatMap((field) =>
      field.args.filter((a) => a.name !== 'after' && a.name !== 'input').map((a) => `${field.name}(${a.name})`),
    );
    expect(narrowing.length).toBeGreaterThan(4);
    expect(new Set(subscriptions.map((s) => `${s.field}(${s.arg})`))).toEqual(new Set(narrowing));
    const eventRoutes = t.routes.filter((r) => r.url.endsWith('/events') && [r.method].flat().includes('GET')).map((r) => r.url);
    // A session's own stream names its session in the path: reading it checks it (test/rest/session-stream.test.ts).
    expect(new Set(routes.map((r) => r.url))).toEqual(new Set(eventRoutes.filter((url) => url !== '/v2/sessions/:session_id/events')));
  });

  it.each(subscriptions)(
    '$field($arg) over graphql-ws is refused with $code, and nothing is watched',
    async ({ query, id, code, message }) => {
      const before = t.services.bus.subscriberCount();
      const client = ws.connect(bob.apiKey);
      const answer = await new Promise<{ errors?: readonly { message: string; extensions?: { code?: string } }[] }>((resolve) => {
        const results: unknown[] = [];
        client.subscribe(
          { query, variables: { id: id() } },
          {
            next: (r) => void results.push(r),
            error: (errors) => resolve({ errors: errors as never }),
            complete: () => resolve(results[0] as never),
          },
        );
      });
      expect(answer.errors?.[0]).toMatchObject({ message: expect.stringMatching(message), extensions: { code } });
      expect(t.services.bus.subscriberCount()).toBe(before);
    },
  );

  it.each(subscriptions)(
    '$field($arg) over GraphQL SSE is refused with $code, and nothing is watched',
    async ({ query, id, code, message }) => {
      const before = t.services.bus.subscriberCount();
      const client = createSseClient({ url: `${t.url}/graphql`, headers: { 'x-api-key': bob.apiKey }, retryAttempts: 0 });
      try {
        const first = await client.iterate({ query, variables: { id: id() } }).next();
        expect(first.value?.errors?.[0]).toMatchObject({ message: expect.stringMatching(message), extensions: { code } });
      } finally {
        client.dispose();
      }
      expect(t.services.bus.subscriberCount()).toBe(before);
    },
  );

  it.each(routes)('GET $url with a stranger’s id is $status, and nothing is watched', async ({ url, query, id, status, error }) => {
    const before = t.services.bus.subscriberCount();
    const res = await t.rest('GET', `${url}?${query(id())}`, { key: bob.apiKey });
    expect(res.status).toBe(status);
    expect(res.body.error).toMatch(error);
    expect(t.services.bus.subscriberCount()).toBe(before);
  });

  it('the owner is still answered: her own argument starts the watch', async () => {
    const client = ws.connect(alice.apiKey);
    const before = t.services.bus.subscriberCount();
    const stop = client.subscribe(
      { query: `subscription($id: ID) { deploymentUpdates(agentId: $id) { seq } }`, variables: { id: ids.privateAgent } },
      { next: () => {}, error: () => {}, complete: () => {} },
    );
    await expect.poll(() => t.services.bus.subscriberCount()).toBe(before + 1);
    stop();
    await expect.poll(() => t.services.bus.subscriberCount()).toBe(before);
  });
});
