import { readFileSync } from 'node:fs';
import { buildSchema, parse } from 'graphql';
import { createClient as createSseClient } from 'graphql-sse';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { describeOperations } from '../../src/rest/openapi.ts';
import { taskOperations } from '../../src/rest/tasks.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { schemaProblems } from '../helpers/openapi.ts';
import { newSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, type SseClient } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';
import { until } from '../helpers/until.ts';
import { expectData } from '../graphql/support.ts';

/**
 * Live feeds on one app: who may narrow a feed to what (feed-strangers), and a user's tasks
 * followed live (task-updates). Each `describe` was a file of its own starting an app with the
 * same settings but for the cap on subscriptions per key, which neither tests (the larger is
 * kept); each has users of its own and counts the bus's watches from before its own steps.
 */
let t: TestApp;
let svc: Awaited<ReturnType<typeof startFakeToolService>>;
const ws = graphqlWsClients(() => t.url);
const streams: SseClient[] = [];

setUp(async (start) => {
  svc = await start.service(startFakeToolService());
  const toolsDir = await toolRegistryWith({ remote: httpTool('remote', svc.url) });
  t = await start.app({ toolsDir, limits: { maxSubscriptionsPerKey: 50 } });
});
beforeEach(() => svc.reset());
afterAll(async () => {
  for (const s of streams.splice(0)) s.close();
  await ws.disposeAll();
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
  const ids = { publicAgent: '', privateAgent: '', trigger: '', task: '', session: '' };
  const UNKNOWN = '00000000-0000-7000-8000-000000000000';
  beforeAll(async () => {
    [alice, bob] = [await t.createUser('alice_feeds'), await t.createUser('bob_feeds')];
    const f = fixtures(t);
    ids.publicAgent = (await f.agent(alice, { public: true })).id;
    ids.privateAgent = (await f.agent(alice, { public: false })).id;
    ids.trigger = (await f.trigger(ids.publicAgent, alice.id)).id;
    ids.task = (await t.db.task.create({ data: { userId: alice.id, tool: 'flux_dev', args: {}, cost: 1, status: 'completed' } })).id;
    ids.session = await newSession(t, alice, [ids.privateAgent]);
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
    [alice, bob] = [await t.createUser('alice'), await t.createUser('bob')];
    await t.services.manna.grant('alice', '100', 'forever');
    await t.services.manna.grant('bob', '100', 'forever');
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
