import { parse } from 'graphql';
import { createClient as createSseClient } from 'graphql-sse';
import { afterAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { schemaProblems } from '../helpers/openapi.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, type SseClient } from '../helpers/sse.ts';

// Following your triggers over your feed: the GraphQL triggerEvents subscription (graphql-ws and
// GraphQL over SSE) and the REST stream GET /v2/agents/triggers/events. Runs started, completed
// and failed, the pause after two failures, your own changes; never another user's; narrowed to
// one trigger. Runs are started by hand, so nothing waits on a schedule.

let t: TestApp;
let llm: FakeOpenAI;
let f: ReturnType<typeof fixtures>;
let alice: TestUser;
let bob: TestUser;
const ws = graphqlWsClients(() => t.url);

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['On', ' it.'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, triggers: { minIntervalS: 1, perUser: 50, runTimeoutS: 900 } });
  f = fixtures(t);
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
});
const streams: SseClient[] = [];
afterAll(async () => {
  for (const s of streams.splice(0)) s.close();
  await ws.disposeAll();
});

const FOLLOW = parse(`subscription Follow($agentId: ID, $triggerId: ID, $after: Seq) {
  triggerEvents(agentId: $agentId, triggerId: $triggerId, after: $after) {
    __typename seq type at
    ... on TriggerRunStarted { triggerId agentId runId scheduledFor trigger { rawId name } }
    ... on TriggerRunCompleted { triggerId runId sessionId messageId trigger { status runs(first: 1) { edges { node { rawId message { rawId content } } } } } }
    ... on TriggerRunFailed { triggerId runId reason errorCount }
    ... on TriggerPaused { triggerId reason message trigger { status } }
    ... on TriggerChanged { triggerId agentId change name status nextScheduledRun }
  }
}`);
type Event = { __typename: string; seq: number; type: string; triggerId: string; [k: string]: unknown };
type Follow = { triggerEvents: Event };

/** Resolves once `count` more subscriptions are open on the bus than `before`. */
const subscribed = (before: number, count = 1) => expect.poll(() => t.services.bus.subscriberCount()).toBe(before + count);

const byHand = (user: TestUser, agentId: string, prompt: string) =>
  t.rest('POST', `/v2/agents/${agentId}/triggers`, { key: user.apiKey, body: { name: prompt, prompt, schedule: null } });

describe('triggerEvents', () => {
  it("follows the caller's triggers over graphql-ws: created, run started, completed with its session and reply; another user's never", async () => {
    const agent = await f.agent(alice);
    const bobsAgent = await f.agent(bob);
    const before = t.services.bus.subscriberCount();
    const mine = wsSubscribe<Follow, object>(ws.connect(alice.apiKey), FOLLOW as never, {});
    const bobs = wsSubscribe<Follow, object>(ws.connect(bob.apiKey), FOLLOW as never, {});
    await subscribed(before, 2);

    const made = await byHand(alice, agent.id, 'Digest');
    expect(made.status).toBe(200);
    const triggerId = made.body.triggerId as string;
    const run = await t.rest('POST', `/v2/agents/${agent.id}/triggers/${triggerId}/run`, { key: alice.apiKey });
    expect(run.status).toBeLessThan(300);
    const done = await mine.waitFor((r) => r.data?.triggerEvents.type === 'trigger_run_completed');
    const stored = await t.db.triggerRun.findFirstOrThrow({ where: { triggerId } });
    expect(mine.results.map((r) => r.data?.triggerEvents)).toEqual([
      expect.objectContaining({
        __typename: 'TriggerChanged',
        triggerId,
        agentId: agent.id,
        change: 'CREATED',
        name: 'Digest',
        status: 'ACTIVE',
      }),
      expect.objectContaining({
        __typename: 'TriggerRunStarted',
        triggerId,
        agentId: agent.id,
        runId: stored.id,
        scheduledFor: null,
        trigger: { rawId: triggerId, name: 'Digest' },
      }),
      expect.objectContaining({ __typename: 'TriggerRunCompleted', triggerId, runId: stored.id }),
    ]);
    const completed = done.data!.triggerEvents;
    expect(completed).toMatchObject({ sessionId: stored.sessionId, messageId: stored.messageId });
    expect(completed.trigger).toEqual({
      status: 'ACTIVE',
      runs: { edges: [{ node: { rawId: stored.id, message: { rawId: stored.messageId, content: 'On it.' } } }] },
    });
    const seqs = mine.results.map((r) => r.data!.triggerEvents.seq);
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);

    // Bob's stream has his own trigger's news and nothing of Alice's.
    const his = await byHand(bob, bobsAgent.id, 'His');
    await bobs.waitFor((r) => r.data?.triggerEvents.triggerId === his.body.triggerId);
    expect(bobs.results.map((r) => r.data?.triggerEvents.triggerId)).toEqual([his.body.triggerId]);
    mine.unsubscribe();
    bobs.unsubscribe();
  });

  it('over GraphQL SSE, narrowed to one trigger: two failed runs, then the pause with its reason; a stranger cannot narrow to it', async () => {
    const agent = await f.agent(alice);
    const other = (await byHand(alice, agent.id, 'Other')).body.triggerId as string;
    const triggerId = (await byHand(alice, agent.id, 'Fail please')).body.triggerId as string;
    llm.choose((request) => (request.body.messages.some((m) => m.content === 'Fail please') ? { status: 500 } : undefined));
    const client = createSseClient({ url: `${t.url}/graphql`, headers: { 'x-api-key': alice.apiKey }, retryAttempts: 0 });
    try {
      const before = t.services.bus.subscriberCount();
      const events = client.iterate<Follow>({ query: FOLLOW.loc!.source.body, variables: { triggerId } });
      const received: Event[] = [];
      const next = async () => {
        const { value } = await events.next();
        if (value?.errors) throw new Error(JSON.stringify(value.errors));
        received.push(value!.data!.triggerEvents);
        return value!.data!.triggerEvents;
      };
      const first = next();
      await subscribed(before);
      const path = `/v2/agents/${agent.id}/triggers`;
      // A run of the other trigger: not in this narrowed stream.
      await t.rest('POST', `${path}/${other}/run`, { key: alice.apiKey });
      await t.rest('POST', `${path}/${triggerId}/run`, { key: alice.apiKey });
      await first; // started
      expect(await next()).toMatchObject({ __typename: 'TriggerRunFailed', errorCount: 1 });
      await t.rest('POST', `${path}/${triggerId}/run`, { key: alice.apiKey });
      await next(); // started
      expect(await next()).toMatchObject({ __typename: 'TriggerRunFailed', errorCount: 2, reason: expect.any(String) });
      expect(await next()).toMatchObject({ __typename: 'TriggerPaused', reason: 'FAILURES', trigger: { status: 'PAUSED' } });
      expect(received.map((e) => e.type)).toEqual([
        'trigger_run_started',
        'trigger_run_failed',
        'trigger_run_started',
        'trigger_run_failed',
        'trigger_paused',
      ]);
      expect(received.every((e) => e.triggerId === triggerId)).toBe(true);
      await events.return?.();
    } finally {
      llm.choose(null);
      client.dispose();
    }

    const stranger = wsSubscribe<Follow, object>(ws.connect(bob.apiKey), FOLLOW as never, { triggerId });
    const ended = await stranger.ended;
    expect(ended.at(-1)?.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const strangerByAgent = wsSubscribe<Follow, object>(ws.connect(bob.apiKey), FOLLOW as never, { agentId: agent.id });
    const refused = await strangerByAgent.ended;
    expect(refused.at(-1)?.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });
});

describe('GET /v2/agents/triggers/events', () => {
  it('streams one trigger of the caller as update frames OpenAPI documents, resumes with Last-Event-ID, and refuses a stranger', async () => {
    const agent = await f.agent(alice);
    const triggerId = (await byHand(alice, agent.id, 'Streamed')).body.triggerId as string;
    const open = async (query: string, headers: Record<string, string> = {}, key = alice.apiKey) => {
      const s = await openSse(`${t.url}/v2/agents/triggers/events${query}`, { headers: { 'x-api-key': key, ...headers } });
      streams.push(s);
      return s;
    };
    const before = t.services.bus.subscriberCount();
    const stream = await open(`?trigger_id=${triggerId}`);
    await subscribed(before);
    await t.rest('PATCH', `/v2/agents/${agent.id}/triggers/${triggerId}`, { key: alice.apiKey, body: { name: 'Renamed' } });
    await t.rest('POST', `/v2/agents/${agent.id}/triggers/${triggerId}/run`, { key: alice.apiKey });
    await stream.waitFor((f) => f.data?.data?.type === 'trigger_run_completed');
    const run = await t.db.triggerRun.findFirstOrThrow({ where: { triggerId } });
    expect(stream.frames.map((f) => f.data)).toEqual([
      {
        event: 'update',
        data: expect.objectContaining({ type: 'trigger_changed', trigger_id: triggerId, agent_id: agent.id, change: 'updated' }),
      },
      {
        event: 'update',
        data: { type: 'trigger_run_started', trigger_id: triggerId, agent_id: agent.id, run_id: run.id, scheduled_for: null },
      },
      {
        event: 'update',
        data: {
          type: 'trigger_run_completed',
          trigger_id: triggerId,
          agent_id: agent.id,
          run_id: run.id,
          session_id: run.sessionId,
          message_id: run.messageId,
        },
      },
    ]);
    expect(stream.frames[0]!.data.data.trigger).toMatchObject({ name: 'Renamed', status: 'active' });
    const doc = (await (await fetch(`${t.url}/v2/openapi.json`)).json()) as any;
    const schema = doc.paths['/v2/agents/triggers/events'].get.responses['200'].content['text/event-stream'].schema;
    for (const frame of stream.frames) expect(schemaProblems(doc, schema, frame.data, { closed: true })).toEqual([]);

    const resumed = await open(`?trigger_id=${triggerId}`, { 'last-event-id': String(stream.frames[1]!.id) });
    await resumed.waitFor((f) => f.id === stream.frames[2]!.id);
    expect(resumed.frames.map((f) => f.id)).toEqual([stream.frames[2]!.id]);

    const stranger = await fetch(`${t.url}/v2/agents/triggers/events?trigger_id=${triggerId}`, { headers: { 'x-api-key': bob.apiKey } });
    expect(stranger.status).toBe(404);
    await stranger.body?.cancel();
  });
});
