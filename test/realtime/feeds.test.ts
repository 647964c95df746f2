import { readFileSync } from 'node:fs';
import { buildSchema, parse } from 'graphql';
import { createClient as createSseClient } from 'graphql-sse';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { FeedEventPayload } from '../../src/domain/core/feed-events.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { schemaProblems } from '../helpers/openapi.ts';
import { newSession } from '../helpers/sessions.ts';
import { openSse, type SseClient } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';
import { until } from '../helpers/until.ts';
import { expectData } from '../graphql/support.ts';

/**
 * The REST and GraphQL helpers over a user's feed, end to end through the real app on loopback.
 * No feature publishes feed events yet, so this file declares what one would (a family's GraphQL
 * types and subscription field, a REST stream route) with the helpers, under names no feature
 * will take, and publishes through the app's own bus. The same app serves what narrows a live
 * feed (feed-strangers) and a user's tasks followed live (task-updates), each a file of its own
 * before and a `describe` here, with users of its own.
 */

// The schema is built once per module registry, and a worker runs several files in one registry
// (vitest.config.ts): the probe is declared in modules of this file's own, and they are dropped
// again after it, so the probe is neither missing here nor left in another file's schema. The
// schema's own plugin registers itself again with them (test/helpers/each-file.ts allows it).
vi.resetModules();
const { feedFamilies } = await import('../../src/domain/core/feed-events.ts');
const { builder } = await import('../../src/graphql/builder.ts');
const { feedEventInterface, followFeed } = await import('../../src/graphql/feed.ts');
const { resumeHeaders, resumePoint, resumeQuery } = await import('../../src/rest/event-stream.ts');
const { feedFrameSchema, streamFeed } = await import('../../src/rest/feed-stream.ts');
const { operation, serve } = await import('../../src/rest/operation.ts');
const { restContext } = await import('../../src/rest/routes.ts');

// --- What a feature writes: its GraphQL types and subscription field (before the schema is built).
const ProbeEvent = feedEventInterface('FeedProbeEvent', 'A change of one of your tasks (the feed helpers under test).', {
  task_created: {
    name: 'FeedProbeTaskCreated',
    description: 'A task was created.',
    fields: (t) => ({ taskId: t.exposeString('taskId'), tool: t.string({ resolve: (e) => e.task.tool }) }),
  },
  task_started: {
    name: 'FeedProbeTaskStarted',
    description: 'A task started.',
    fields: (t) => ({ taskId: t.exposeString('taskId') }),
  },
  task_progress: {
    name: 'FeedProbeTaskProgress',
    description: 'A task progressed.',
    fields: (t) => ({ taskId: t.exposeString('taskId'), progress: t.exposeFloat('progress') }),
  },
  task_completed: {
    name: 'FeedProbeTaskCompleted',
    description: 'A task completed.',
    fields: (t) => ({ taskId: t.exposeString('taskId') }),
  },
  task_failed: { name: 'FeedProbeTaskFailed', description: 'A task failed.', fields: (t) => ({ error: t.exposeString('error') }) },
  task_cancelled: {
    name: 'FeedProbeTaskCancelled',
    description: 'A task was cancelled.',
    fields: (t) => ({ taskId: t.exposeString('taskId') }),
  },
});
builder.subscriptionFields((t) => ({
  feedProbe: t.field({
    type: ProbeEvent,
    args: { taskId: t.arg.id(), after: t.arg({ type: 'Seq' }) },
    ...followFeed(feedFamilies.task, ({ taskId }: { taskId?: string | number | null; after?: number | null }) =>
      taskId ? (e) => e.taskId === String(taskId) : undefined,
    ),
  }),
}));

// --- ... and its REST stream route.
const probeFrames = feedFrameSchema('FeedProbeStream', z.object({ type: z.string(), task_id: z.string() }));
const probeRoute = operation({
  operationId: 'feedProbe',
  method: 'get',
  path: '/test/feed-probe',
  tag: 'Tasks',
  summary: 'Your task changes, live (the feed helpers under test)',
  query: resumeQuery.extend({ taskId: z.string().optional() }),
  headers: resumeHeaders,
  ok: { events: probeFrames },
  handler: async (request, reply, { services, stream }) => {
    const { taskId } = request.query;
    const events = await services.feeds.watch(request.viewer, {
      after: resumePoint(request.headers['last-event-id'], request.query.after),
      types: feedFamilies.task,
      where: taskId ? (e) => e.taskId === taskId : undefined,
    });
    return streamFeed(reply, events, stream, (e) => ({ type: e.type, task_id: e.taskId }));
  },
});

// The app (and with it the schema) only now, with the probe declared.
const { startTestApp } = await import('../helpers/app.ts');
const { describeOperations } = await import('../../src/rest/openapi.ts');
const { taskOperations } = await import('../../src/rest/tasks.ts');
type TestApp = Awaited<ReturnType<typeof startTestApp>>;
type TestUser = Awaited<ReturnType<TestApp['createUser']>>;

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
const ws = graphqlWsClients(() => t.url);
const streams: SseClient[] = [];

let svc: Awaited<ReturnType<typeof startFakeToolService>>;

// The app with the probe and, for task-updates, a loopback tool service; 50 subscriptions per key
// (feed-strangers' setting; no part tests the cap); webhooks may name a loopback address
// (feed-strangers makes one, never called).
beforeAll(async () => {
  svc = await startFakeToolService();
  const toolsDir = await toolRegistryWith({ remote: httpTool('remote', svc.url) });
  t = await startTestApp(
    { toolsDir, limits: { maxSubscriptionsPerKey: 50 }, outbound: { allowHttp: true, allowPrivate: true } },
    undefined,
    {
      beforeListen: (app, config) => serve(app.http, probeRoute, restContext(app.services, config.events)),
    },
  );
  [alice, bob] = [await t.createUser('alice'), await t.createUser('bob')];
});
beforeEach(() => svc.reset());
afterAll(async () => {
  for (const s of streams.splice(0)) s.close();
  await ws.disposeAll();
  await t?.close();
  await svc?.close();
  vi.resetModules();
});

const publish = (userId: string, payload: FeedEventPayload) => t.services.bus.feeds.publish(userId, payload);
const progress = (taskId: string, value: number): FeedEventPayload => ({ type: 'task_progress', taskId, progress: value, message: null });

async function restStream(key: string, query = '', headers: Record<string, string> = {}) {
  const s = await openSse(`${t.url}/test/feed-probe${query}`, { headers: { 'x-api-key': key, ...headers } });
  streams.push(s);
  return s;
}

/** Resolves once `count` more subscriptions are open on the bus than `before`. */
const subscribed = (before: number, count = 1) => expect.poll(() => t.services.bus.subscriberCount()).toBe(before + count);

const PROBE = parse(`subscription Probe($taskId: ID, $after: Seq) {
  feedProbe(taskId: $taskId, after: $after) {
    __typename seq type
    ... on FeedProbeTaskProgress { taskId progress }
    ... on FeedProbeTaskCompleted { taskId }
  }
}`);
type Probe = { feedProbe: { __typename: string; seq: number; type: string; taskId?: string; progress?: number } };

describe('REST SSE over a feed (streamFeed)', () => {
  it("streams the caller's own events as update frames with ids, in the frames OpenAPI documents; another user's never", async () => {
    const before = t.services.bus.subscriberCount();
    const [alices, bobs] = [await restStream(alice.apiKey), await restStream(bob.apiKey)];
    await subscribed(before, 2);
    await publish(bob.id, progress('bobs-task', 0.5));
    const published = [await publish(alice.id, progress('t1', 0.5)), await publish(alice.id, progress('t1', 1))];
    await publish(alice.id, { type: 'trigger_finished', triggerId: 'not-a-task', agentId: 'a' });
    const done = await publish(alice.id, { type: 'task_completed', taskId: 't1', result: null, outputs: [], cost: 3 });
    await alices.waitFor((f) => f.id === done.seq);
    expect(alices.frames.map((f) => [f.id, f.data])).toEqual([
      [published[0]!.seq, { event: 'update', data: { type: 'task_progress', task_id: 't1' } }],
      [published[1]!.seq, { event: 'update', data: { type: 'task_progress', task_id: 't1' } }],
      [done.seq, { event: 'update', data: { type: 'task_completed', task_id: 't1' } }],
    ]);
    await bobs.waitFor((f) => f.data.data?.task_id === 'bobs-task');
    expect(bobs.frames.map((f) => f.data.data.task_id)).toEqual(['bobs-task']);
    const doc = describeOperations([probeRoute]) as any;
    const schema = doc.paths['/test/feed-probe'].get.responses['200'].content['text/event-stream'].schema;
    for (const frame of alices.frames) expect(schemaProblems(doc, schema, frame.data, { closed: true })).toEqual([]);
  });

  it('resumes with Last-Event-ID (or ?after) from exactly the next event, narrowed by the route to one task', async () => {
    const first = await publish(alice.id, progress('t2', 0.1));
    const rest = [await publish(alice.id, progress('other', 0.2)), await publish(alice.id, progress('t2', 0.3))];
    const resumed = await restStream(alice.apiKey, '?taskId=t2', { 'last-event-id': String(first.seq) });
    await resumed.waitFor((f) => f.id === rest[1]!.seq);
    expect(resumed.frames.map((f) => f.id)).toEqual([rest[1]!.seq]);
    const byQuery = await restStream(alice.apiKey, `?after=${first.seq}`);
    await byQuery.waitFor((f) => f.id === rest[1]!.seq);
    expect(byQuery.frames.map((f) => f.id)).toEqual(rest.map((e) => e.seq));
    const bad = await fetch(`${t.url}/test/feed-probe`, { headers: { 'x-api-key': alice.apiKey, 'last-event-id': 'x' } });
    expect(bad.status).toBe(400);
  });

  it('ends with an error frame naming the reason, then done, when the key it was opened with is deleted', async () => {
    const second = (await t.services.apiKeys.create(alice.id)).apiKey;
    const before = t.services.bus.subscriberCount();
    const stream = await restStream(second);
    await subscribed(before);
    expect((await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey: second } })).status).toBe(200);
    expect((await stream.done).slice(-2).map((f) => f.data)).toEqual([
      {
        event: 'error',
        data: { error: 'The API key of this stream was deleted', code: 'ACCESS_REVOKED', last_event_id: null },
      },
      { event: 'done', data: '' },
    ]);
  });
});

describe('GraphQL subscription over a feed (feedEventInterface, followFeed)', () => {
  it("delivers the caller's own events over graphql-ws as typed events; another user's never", async () => {
    const before = t.services.bus.subscriberCount();
    const mine = wsSubscribe(ws.connect(alice.apiKey), PROBE as never, {}) as ReturnType<typeof wsSubscribe<Probe, object>>;
    const bobs = wsSubscribe(ws.connect(bob.apiKey), PROBE as never, {}) as ReturnType<typeof wsSubscribe<Probe, object>>;
    await subscribed(before, 2);
    await publish(bob.id, progress('bobs', 0.9));
    const sent = await publish(alice.id, progress('t3', 0.25));
    const completed = await publish(alice.id, { type: 'task_completed', taskId: 't3', result: { url: 'u' }, outputs: [], cost: 1 });
    await mine.waitFor((r) => r.data?.feedProbe.seq === completed.seq);
    expect(mine.results.map((r) => r.data?.feedProbe)).toEqual([
      { __typename: 'FeedProbeTaskProgress', seq: sent.seq, type: 'task_progress', taskId: 't3', progress: 0.25 },
      { __typename: 'FeedProbeTaskCompleted', seq: completed.seq, type: 'task_completed', taskId: 't3' },
    ]);
    await bobs.waitFor((r) => r.data?.feedProbe.taskId === 'bobs');
    expect(bobs.results.map((r) => r.data?.feedProbe.taskId)).toEqual(['bobs']);
    mine.unsubscribe();
    bobs.unsubscribe();
  });

  it('resumes with after, narrowed by the field to one task, and ends a resume it cannot serve with EVENTS_EXPIRED and lastSeq', async () => {
    const first = await publish(alice.id, progress('t4', 0.1));
    const later = [await publish(alice.id, progress('t5', 0.2)), await publish(alice.id, progress('t4', 0.3))];
    const client = ws.connect(alice.apiKey);
    const resumed = wsSubscribe<Probe, object>(client, PROBE as never, { taskId: 't4', after: first.seq });
    await resumed.waitFor((r) => r.data?.feedProbe.seq === later[1]!.seq);
    expect(resumed.results.map((r) => r.data?.feedProbe.seq)).toEqual([later[1]!.seq]);
    resumed.unsubscribe();
    const beyond = later[1]!.seq + 1_000;
    const expired = wsSubscribe<Probe, object>(client, PROBE as never, { after: beyond });
    const results = await expired.ended;
    expect(results.at(-1)?.errors?.[0]?.extensions).toMatchObject({ code: 'EVENTS_EXPIRED', lastSeq: beyond });
  });

  it('delivers over GraphQL SSE too, and ends it with FORBIDDEN when the key is deleted; a socket with that key closes', async () => {
    const key = (await t.services.apiKeys.create(alice.id)).apiKey;
    const client = createSseClient({ url: `${t.url}/graphql`, headers: { 'x-api-key': key }, retryAttempts: 0 });
    try {
      const before = t.services.bus.subscriberCount();
      const events = client.iterate<Probe>({
        query: 'subscription { feedProbe { __typename seq ... on FeedProbeTaskProgress { taskId } } }',
      });
      const first = events.next();
      const socket = wsSubscribe<Probe, object>(ws.connect(key), PROBE as never, {});
      await subscribed(before, 2);
      const sent = await publish(alice.id, progress('over-sse', 0.5));
      expect((await first).value?.data?.feedProbe).toEqual({ __typename: 'FeedProbeTaskProgress', seq: sent.seq, taskId: 'over-sse' });
      expect((await t.rest('DELETE', '/apikeys', { key: alice.apiKey, body: { apiKey: key } })).status).toBe(200);
      const end = await events.next();
      expect(end.value?.errors?.[0]).toMatchObject({
        message: 'The API key of this stream was deleted',
        extensions: { code: 'FORBIDDEN' },
      });
      await expect(socket.ended).rejects.toMatchObject({ code: 4403 });
      await expect.poll(() => t.services.bus.subscriberCount()).toBe(before);
    } finally {
      client.dispose();
    }
  });
});

describe('feed-strangers', () => {
  /**
   * What narrows a live feed is checked before anything is watched (docs/feeds.md): a stranger who
   * names another user's task, agent, trigger or session is refused as reading it would be, over
   * graphql-ws, GraphQL over SSE and REST alike, and no watch starts. Every subscription field and
   * event route that takes such an argument has its cases here; a new one without them fails the
   * first test.
   */
  let alice: TestUser;
  let bob: TestUser;
  const ids = { publicAgent: '', privateAgent: '', trigger: '', task: '', session: '', webhook: '' };
  const UNKNOWN = '00000000-0000-7000-8000-000000000000';
  beforeAll(async () => {
    [alice, bob] = [await t.createUser('alice_feeds'), await t.createUser('bob_feeds')];
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
    {
      url: '/v2/agents/triggers/events',
      query: (id) => `trigger_id=${id}`,
      id: () => ids.trigger,
      status: 404,
      error: /Trigger not found/,
    },
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
});

describe('task-updates', () => {
  /**
   * A user's tasks followed live, on their feed: `GET /v2/tasks/events` (REST SSE) and the
   * `taskUpdates` subscription (graphql-ws and GraphQL over SSE), driven with real clients
   * against the real app, tasks run by a real (loopback) tool service and the built-in image tool.
   */
  let alice: TestUser;
  let bob: TestUser;
  beforeAll(async () => {
    [alice, bob] = [await t.createUser('alice_tasks'), await t.createUser('bob_tasks')];
    await t.services.manna.grant(alice.username, '100', 'forever');
    await t.services.manna.grant(bob.username, '100', 'forever');
  });

  const deferred = () => {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    return { promise, resolve };
  };
  const create = async (user: TestUser, body: unknown) => {
    const res = await t.rest('POST', '/v2/tasks/create', { key: user.apiKey, body });
    expect(res.status).toBe(200);
    return res.body.task as { _id: string };
  };
  async function events(user: TestUser, query = '', headers: Record<string, string> = {}) {
    const s = await openSse(
      `${t.url}/v2/tasks/events${query}`,
      { headers: { 'x-api-key': user.apiKey, ...headers } },
      { apart: ['task-update'] },
    );
    streams.push(s);
    return s;
  }
  /** Resolves once `count` more subscriptions are open on the bus than `before`. */
  const subscribed = (before: number, count = 1) => expect.poll(() => t.services.bus.subscriberCount()).toBe(before + count);
  const ends = ['task_completed', 'task_failed', 'task_cancelled'];
  const dataOf = (s: SseClient, taskId: string) => s.frames.filter((f) => f.data.data?.taskId === taskId).map((f) => f.data.data);

  describe('GET /v2/tasks/events', () => {
    it("streams a task's life in order, progress and result included, in the frames OpenAPI documents; another user's never", async () => {
      const steps = [deferred(), deferred()];
      svc.enqueue({
        lines: [{ progress: 0.25, message: 'sketching' }, { progress: 0.75 }, { result: { ok: true } }],
        before: (i) => (i === 0 ? Promise.resolve() : steps[i - 1]!.promise),
      });
      const before = t.services.bus.subscriberCount();
      const [mine, bobs] = [await events(alice), await events(bob)];
      expect(mine.status).toBe(200);
      await subscribed(before, 2);
      const task = await create(alice, { tool: 'remote', args: { prompt: 'slowly' } });
      await mine.waitFor((f) => f.data.data?.type === 'task_progress' && f.data.data.progress === 0.25);
      steps[0]!.resolve();
      await mine.waitFor((f) => f.data.data?.type === 'task_progress' && f.data.data.progress === 0.75);
      steps[1]!.resolve();
      await mine.waitFor((f) => f.data.data?.type === 'task_completed');
      const at = expect.any(String);
      expect(dataOf(mine, task._id)).toEqual([
        {
          type: 'task_created',
          taskId: task._id,
          at,
          task: {
            _id: task._id,
            tool: 'remote',
            output_type: expect.any(String),
            status: 'pending',
            cost: expect.any(Number),
            agent: null,
            session: null,
            createdAt: at,
          },
        },
        { type: 'task_started', taskId: task._id, at },
        { type: 'task_progress', taskId: task._id, at, progress: 0.25, message: 'sketching' },
        { type: 'task_progress', taskId: task._id, at, progress: 0.75, message: null },
        { type: 'task_completed', taskId: task._id, at, result: { ok: true }, outputs: [], cost: expect.any(Number) },
      ]);
      // Numbered as the feed numbers them: ids only grow.
      const ids = mine.frames.map((f) => f.id!);
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
      expect(bobs.frames).toEqual([]);
      const doc = describeOperations(taskOperations) as any;
      const schema = doc.paths['/v2/tasks/events'].get.responses['200'].content['text/event-stream'].schema;
      for (const frame of mine.frames) expect(schemaProblems(doc, schema, frame.data, { closed: true })).toEqual([]);
    });

    it("carries the original's task-update frames beside its own: the task as GET /v2/tasks/{id} shows it, first as a one-task stream opens, then before each change", async () => {
      // The tool says how far it is only once the stream is open (it needs the task's id first), so
      // the progress cannot come before anyone listens.
      const [listening, step] = [deferred(), deferred()];
      svc.enqueue({
        lines: [{ progress: 0.5, message: 'halfway' }, { result: { ok: 'done' } }],
        before: (i) => (i === 0 ? listening.promise : step.promise),
      });
      const task = await create(alice, { tool: 'remote', args: { prompt: 'followed the old way' } });
      const before = t.services.bus.subscriberCount();
      const s = await events(alice, `?taskId=${task._id}`);
      await subscribed(before);
      listening.resolve();
      // The first frame, before any change: the task as it is now (a client that listens late still learns where it is).
      await expect.poll(() => s.named.length).toBeGreaterThan(0);
      expect(s.named[0]).toMatchObject({ name: 'task-update', data: { _id: task._id, taskId: task._id, tool: 'remote' } });
      expect(['pending', 'running']).toContain(s.named[0]!.data.status);
      await s.waitFor((f) => f.data.data?.type === 'task_progress');
      step.resolve();
      await s.waitFor((f) => f.data.data?.type === 'task_completed');
      const shown = (await t.rest('GET', `/v2/tasks/${task._id}`, { key: alice.apiKey })).body.task;
      // One before each of parley's own frames, which are as they were.
      expect(s.named.length).toBe(1 + s.frames.length);
      expect(s.named.every((n) => n.name === 'task-update' && n.data.taskId === task._id)).toBe(true);
      expect(s.named.at(-1)!.data).toEqual({ ...shown, taskId: task._id });
      expect(shown.result).toEqual([expect.objectContaining({ data: { ok: 'done' } })]);
      const order = ['pending', 'running', 'completed'];
      const statuses = s.named.map((n) => order.indexOf(n.data.status));
      expect(statuses).toEqual([...statuses].sort((a, b) => a - b));

      // A task that ended before its client listened: the first frame says so, and the client stops waiting there.
      const late = await events(alice, `?taskId=${task._id}`);
      await expect.poll(() => late.named.length).toBe(1);
      expect(late.named[0]!.data).toEqual({ ...shown, taskId: task._id });
      expect(late.frames).toEqual([]);
      // The whole feed (no taskId) opens with none: there is no one task to tell.
      const all = await events(alice);
      const other = await create(alice, { tool: 'flux_dev', args: { prompt: 'another', n_samples: 1 } });
      await all.waitFor((f) => f.data.data?.taskId === other._id && ends.includes(f.data.data.type));
      expect(all.named.map((n) => n.data.taskId)).toEqual(all.frames.map((f) => f.data.data.taskId));
    });

    it('names the creations a completed task made; a failed one says why', async () => {
      const before = t.services.bus.subscriberCount();
      const s = await events(alice);
      await subscribed(before);
      const made = await create(alice, { tool: 'flux_dev', args: { prompt: 'a kite', n_samples: 1 } });
      const done = (await s.waitFor((f) => f.data.data?.taskId === made._id && ends.includes(f.data.data.type))).data.data;
      const shown = (await t.rest('GET', `/v2/tasks/${made._id}`, { key: alice.apiKey })).body.task;
      expect(done).toMatchObject({ type: 'task_completed', cost: shown.cost });
      expect(done.outputs).toEqual(
        shown.result[0].output.map((o: { creationId: string; url: string; thumbnail: string | null }) => ({
          creationId: o.creationId,
          url: o.url,
          thumbnail: o.thumbnail,
        })),
      );
      expect(done.outputs).toHaveLength(1);
      svc.enqueue({ status: 422, answer: { error: 'no' } });
      const failing = await create(alice, { tool: 'remote', args: { prompt: 'refused' } });
      const failed = (await s.waitFor((f) => f.data.data?.taskId === failing._id && ends.includes(f.data.data.type))).data.data;
      expect(failed).toEqual({
        type: 'task_failed',
        taskId: failing._id,
        at: expect.any(String),
        error: 'The tool service answered HTTP 422',
      });
    });

    it('narrows to one task of yours and resumes from Last-Event-ID or ?after; others’ tasks and unknown ids are not found', async () => {
      const before = t.services.bus.subscriberCount();
      const all = await events(alice);
      await subscribed(before);
      const task = await create(alice, { tool: 'remote', args: { prompt: 'once' } });
      const other = await create(alice, { tool: 'remote', args: { prompt: 'twice' } });
      await all.waitFor((f) => f.data.data?.taskId === task._id && ends.includes(f.data.data.type));
      await all.waitFor((f) => f.data.data?.taskId === other._id && ends.includes(f.data.data.type));
      const created = all.frames.find((f) => f.data.data.taskId === task._id && f.data.data.type === 'task_created')!;
      const expected = all.frames.filter((f) => f.data.data.taskId === task._id && f.id! > created.id!).map((f) => f.id);
      const resumed = await events(alice, `?taskId=${task._id}`, { 'last-event-id': String(created.id) });
      await resumed.waitFor((f) => f.data.data?.type === 'task_completed');
      expect(resumed.frames.map((f) => f.id)).toEqual(expected);
      const byQuery = await events(alice, `?taskId=${task._id}&after=${created.id}`);
      await byQuery.waitFor((f) => f.data.data?.type === 'task_completed');
      expect(byQuery.frames.map((f) => f.id)).toEqual(expected);

      const bobsTask = await create(bob, { tool: 'remote', args: { prompt: 'mine' } });
      for (const taskId of [bobsTask._id, '00000000-0000-4000-8000-000000000000', 'not-an-id']) {
        const res = await fetch(`${t.url}/v2/tasks/events?taskId=${taskId}`, { headers: { 'x-api-key': alice.apiKey } });
        expect(res.status).toBe(404);
        expect(await res.json()).toMatchObject({ error: 'Task not found' });
      }
      const bad = await fetch(`${t.url}/v2/tasks/events`, { headers: { 'x-api-key': alice.apiKey, 'last-event-id': 'x' } });
      expect(bad.status).toBe(400);
      expect((await fetch(`${t.url}/v2/tasks/events`)).status).toBe(401);
      // Bob's task calls the tool service in the background: it ends here, not during the next test,
      // whose script its call would take (a CI run saw that test's task answered with no progress).
      await until("bob's task to end", async () => {
        const status = (await t.db.task.findUnique({ where: { id: bobsTask._id } }))?.status;
        return status !== 'pending' && status !== 'running';
      });
    });
  });

  const TASK_UPDATES = parse(`subscription TaskUpdates($taskId: ID, $after: Seq) {
  taskUpdates(taskId: $taskId, after: $after) {
    __typename seq type
    ... on TaskCreated { rawTaskId toolKey cost }
    ... on TaskStarted { rawTaskId }
    ... on TaskProgressed { rawTaskId progress message }
    ... on TaskCompleted { rawTaskId result cost outputs { rawCreationId url } task { rawId status progress } }
    ... on TaskFailed { rawTaskId error }
    ... on TaskCancelled { rawTaskId }
  }
}`);
  type Update = { __typename: string; seq: number; type: string; rawTaskId: string; [k: string]: unknown };
  type Updates = { taskUpdates: Update };
  const CREATE = parse(`mutation Create($tool: String!, $args: JSON) { createTask(tool: $tool, args: $args) { rawId status } }`);
  const CANCEL = parse(`mutation Cancel($taskId: ID!) { cancelTask(taskId: $taskId) { rawId status } }`);

  describe('the taskUpdates subscription', () => {
    it("delivers a task's life over graphql-ws, typed per event, the result and the task as it ended; another user's never", async () => {
      const steps = [deferred()];
      svc.enqueue({
        lines: [{ progress: 0.5, message: 'halfway' }, { result: { answer: 42 } }],
        before: (i) => (i === 0 ? Promise.resolve() : steps[0]!.promise),
      });
      const before = t.services.bus.subscriberCount();
      const mine = wsSubscribe<Updates, object>(ws.connect(alice.apiKey), TASK_UPDATES as never, {});
      const bobs = wsSubscribe<Updates, object>(ws.connect(bob.apiKey), TASK_UPDATES as never, {});
      await subscribed(before, 2);
      const made = expectData(await t.gql(CREATE as never, { tool: 'remote', args: { prompt: 'gql' } }, alice.apiKey)) as {
        createTask: { rawId: string; status: string };
      };
      const id = made.createTask.rawId;
      expect(made.createTask.status).toBe('PENDING');
      await mine.waitFor((r) => r.data?.taskUpdates.__typename === 'TaskProgressed');
      steps[0]!.resolve();
      await mine.waitFor((r) => r.data?.taskUpdates.__typename === 'TaskCompleted');
      const got = mine.results.map((r) => r.data!.taskUpdates);
      expect(got.map((u) => [u.__typename, u.type, u.rawTaskId])).toEqual([
        ['TaskCreated', 'task_created', id],
        ['TaskStarted', 'task_started', id],
        ['TaskProgressed', 'task_progress', id],
        ['TaskCompleted', 'task_completed', id],
      ]);
      expect(got[0]).toMatchObject({ toolKey: 'remote', cost: expect.any(Number) });
      expect(got[2]).toMatchObject({ progress: 0.5, message: 'halfway' });
      expect(got[3]).toMatchObject({ result: { answer: 42 }, outputs: [], task: { rawId: id, status: 'COMPLETED', progress: 1 } });
      expect(got.map((u) => u.seq)).toEqual([...got.map((u) => u.seq)].sort((a, b) => a - b));
      expect(mine.results.every((r) => !r.errors)).toBe(true);
      expect(bobs.results).toEqual([]);
      mine.unsubscribe();
      bobs.unsubscribe();
    });

    it('follows one task over GraphQL SSE to its cancellation; another user’s task id is not found', async () => {
      const hold = deferred();
      svc.enqueue({ lines: [{ progress: 0.1 }, { result: { never: true } }], before: (i) => (i === 0 ? Promise.resolve() : hold.promise) });
      // Where alice's feed is before the task, to follow it from its creation.
      const from = await t.services.bus.feeds.position(alice.id);
      const task = await create(alice, { tool: 'remote', args: { prompt: 'to cancel' } });
      const client = createSseClient({ url: `${t.url}/graphql`, headers: { 'x-api-key': alice.apiKey }, retryAttempts: 0 });
      try {
        const before = t.services.bus.subscriberCount();
        const updates = client.iterate<Updates>({ query: TASK_UPDATES.loc!.source.body, variables: { taskId: task._id, after: from } });
        const seen: Update[] = [];
        for (;;) {
          const next = await updates.next();
          expect(next.value?.errors).toBeUndefined();
          seen.push(next.value!.data!.taskUpdates);
          if (seen.at(-1)!.type === 'task_progress') break;
        }
        await subscribed(before);
        expect(expectData(await t.gql(CANCEL as never, { taskId: task._id }, alice.apiKey))).toEqual({
          cancelTask: { rawId: task._id, status: 'CANCELLED' },
        });
        seen.push((await updates.next()).value!.data!.taskUpdates);
        expect(seen.map((u) => [u.type, u.rawTaskId])).toEqual([
          ['task_created', task._id],
          ['task_started', task._id],
          ['task_progress', task._id],
          ['task_cancelled', task._id],
        ]);
        await updates.return?.(undefined);
        hold.resolve();

        const bobsTask = await create(bob, { tool: 'remote', args: { prompt: 'not yours' } });
        const refused = await client.iterate<Updates>({ query: TASK_UPDATES.loc!.source.body, variables: { taskId: bobsTask._id } }).next();
        expect(refused.value?.errors?.[0]).toMatchObject({ message: 'Task not found', extensions: { code: 'NOT_FOUND' } });
        await expect.poll(() => t.services.bus.subscriberCount()).toBe(before);
      } finally {
        client.dispose();
      }
    });
  });
});
