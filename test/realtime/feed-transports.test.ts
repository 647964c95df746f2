import { parse } from 'graphql';
import { createClient as createSseClient } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { FeedEventPayload } from '../../src/domain/core/feed-events.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { schemaProblems } from '../helpers/openapi.ts';
import { openSse, type SseClient } from '../helpers/sse.ts';

/**
 * The REST and GraphQL helpers over a user's feed, end to end through the real app on loopback.
 * No feature publishes feed events yet, so this file declares what one would (a family's GraphQL
 * types and subscription field, a REST stream route) with the helpers, under names no feature
 * will take, and publishes through the app's own bus.
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
type TestApp = Awaited<ReturnType<typeof startTestApp>>;
type TestUser = Awaited<ReturnType<TestApp['createUser']>>;

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
const ws = graphqlWsClients(() => t.url);
const streams: SseClient[] = [];

beforeAll(async () => {
  t = await startTestApp({ limits: { maxSubscriptionsPerKey: 20 } }, undefined, {
    beforeListen: (app, config) => serve(app.http, probeRoute, restContext(app.services, config.events)),
  });
  [alice, bob] = [await t.createUser('alice'), await t.createUser('bob')];
});
afterAll(async () => {
  for (const s of streams.splice(0)) s.close();
  await ws.disposeAll();
  await t.close();
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
