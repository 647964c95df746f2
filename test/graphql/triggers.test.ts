import { parse } from 'graphql';
import { createClient as createSseClient } from 'graphql-sse';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';

// Triggers over GraphQL: the type (a Node), Agent.triggers, the four mutations, and each run's
// session and reply; and following them: the triggerEvents subscription over graphql-ws and over
// SSE, runs started, completed and failed, the pause after two failures, the caller's own changes,
// never another user's, narrowed to one trigger (runs started by hand, so nothing waits on a
// schedule). Firing on a schedule: test/triggers/firing.test.ts.

const CreateTrigger = graphql(`
  mutation CreateTriggerDoc($agentId: ID!, $input: CreateTriggerInput!) {
    createTrigger(agentId: $agentId, input: $input) {
      id rawId name prompt context status nextScheduledRun lastRunTime errorCount lastError sessionTarget
      schedule { second minute hour dayOfMonth month dayOfWeek timezone startDate endDate cron }
      agent { rawId } owner { username }
    }
  }
`);
const UpdateTrigger = graphql(`
  mutation UpdateTriggerDoc($id: ID!, $input: UpdateTriggerInput!) {
    updateTrigger(id: $id, input: $input) { rawId name status nextScheduledRun errorCount schedule { cron timezone } }
  }
`);
const RunTrigger = graphql(`
  mutation RunTriggerDoc($id: ID!) { runTrigger(id: $id) { rawId status scheduledFor startedAt } }
`);
const DeleteTrigger = graphql(`
  mutation DeleteTriggerDoc($id: ID!) { deleteTrigger(id: $id) }
`);
const AgentTriggers = graphql(`
  query AgentTriggersDoc($id: ID!, $first: Int, $after: String) {
    agent(id: $id) {
      triggers(first: $first, after: $after) {
        edges { cursor node { rawId name status } }
        pageInfo { hasNextPage endCursor }
      }
    }
  }
`);
const TriggerRuns = graphql(`
  query TriggerRunsDoc($id: ID!) {
    node(id: $id) {
      ... on Trigger {
        status lastRunTime
        runs(first: 10) {
          edges { node { rawId status scheduledFor finishedAt error session { rawId title } message { rawId role status content } } }
        }
      }
    }
  }
`);

let t: TestApp;
let llm: FakeOpenAI;
let f: ReturnType<typeof fixtures>;
let alice: TestUser;
let bob: TestUser;

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Hello', '.'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, triggers: { minIntervalS: 1, perUser: 50, runTimeoutS: 900 } });
  f = fixtures(t);
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
});

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('GraphQL triggers', () => {
  it('createTrigger makes one with a schedule, in the schedule’s zone, planned in UTC', async () => {
    const agent = await f.agent(alice);
    const made = expectData(
      await t.gql(
        CreateTrigger,
        {
          agentId: agent.id,
          input: {
            name: 'Standup',
            prompt: 'What is on today?',
            context: 'Team of four',
            schedule: { second: '0', minute: '0', hour: '9', dayOfWeek: 'mon-fri', timezone: 'America/New_York' },
          },
        },
        alice.apiKey,
      ),
    ).createTrigger;
    expect(made).toMatchObject({
      name: 'Standup',
      prompt: 'What is on today?',
      context: 'Team of four',
      status: 'ACTIVE',
      lastRunTime: null,
      errorCount: 0,
      lastError: null,
      sessionTarget: 'NEW',
      schedule: {
        second: '0',
        minute: '0',
        hour: '9',
        dayOfMonth: '*',
        month: '*',
        dayOfWeek: 'mon-fri',
        timezone: 'America/New_York',
        cron: '0 9 * * mon-fri',
      },
      agent: { rawId: agent.id },
      owner: { username: 'alice' },
    });
    expect(made.nextScheduledRun).toMatch(/T1[34]:00:00\.000Z$/);
    expect(Buffer.from(made.id, 'base64').toString()).toBe(`Trigger:${made.rawId}`);
  });

  it('refuses a stranger as for an agent they cannot see, and bad schedules naming the field', async () => {
    const agent = await f.agent(alice, { public: true });
    const privateAgent = await f.agent(alice, { public: false });
    const input = { prompt: 'Hi' };
    const onPublic = expectGraphQLError(await t.gql(CreateTrigger, { agentId: agent.id, input }, bob.apiKey), 'FORBIDDEN');
    const onPrivate = expectGraphQLError(await t.gql(CreateTrigger, { agentId: privateAgent.id, input }, bob.apiKey), 'FORBIDDEN');
    expect(onPublic.message).toBe(onPrivate.message);
    expect(await t.db.trigger.count({ where: { agentId: { in: [agent.id, privateAgent.id] } } })).toBe(0);

    const bad = expectGraphQLError(
      await t.gql(
        CreateTrigger,
        { agentId: agent.id, input: { prompt: 'Hi', schedule: { second: '0', minute: '0', hour: '0', dayOfMonth: '31', month: '2' } } },
        alice.apiKey,
      ),
      'BAD_USER_INPUT',
    );
    expect(bad.extensions?.field).toBe('schedule.dayOfMonth');
    const zone = expectGraphQLError(
      await t.gql(
        CreateTrigger,
        { agentId: agent.id, input: { prompt: 'Hi', schedule: { second: '0', timezone: 'Moon/Base' } } },
        alice.apiKey,
      ),
      'BAD_USER_INPUT',
    );
    expect(zone.extensions?.field).toBe('schedule.timezone');
  });

  it('Agent.triggers pages the agent’s triggers, newest first, for its owner only', async () => {
    const agent = await f.agent(alice, { public: true });
    for (const name of ['one', 'two', 'three'])
      expectData(await t.gql(CreateTrigger, { agentId: agent.id, input: { name, prompt: name } }, alice.apiKey));
    const first = expectData(await t.gql(AgentTriggers, { id: agent.id, first: 2 }, alice.apiKey)).agent.triggers!;
    expect(first.edges.map((e) => e.node.name)).toEqual(['three', 'two']);
    expect(first.pageInfo.hasNextPage).toBe(true);
    const rest = expectData(await t.gql(AgentTriggers, { id: agent.id, first: 2, after: first.pageInfo.endCursor }, alice.apiKey)).agent
      .triggers!;
    expect(rest.edges.map((e) => e.node.name)).toEqual(['one']);
    expect(rest.pageInfo.hasNextPage).toBe(false);
    expect(expectData(await t.gql(AgentTriggers, { id: agent.id }, bob.apiKey)).agent.triggers).toBeNull();
  });

  it('updateTrigger pauses and resumes; deleteTrigger deletes; a stranger changes nothing', async () => {
    const agent = await f.agent(alice);
    const made = expectData(
      await t.gql(CreateTrigger, { agentId: agent.id, input: { prompt: 'Tick', schedule: { second: '0', minute: '*/5' } } }, alice.apiKey),
    ).createTrigger;
    expectGraphQLError(await t.gql(UpdateTrigger, { id: made.id, input: { status: 'PAUSED' } }, bob.apiKey), 'NOT_FOUND');
    const paused = expectData(await t.gql(UpdateTrigger, { id: made.id, input: { status: 'PAUSED' } }, alice.apiKey)).updateTrigger;
    expect(paused).toMatchObject({ status: 'PAUSED', nextScheduledRun: null });
    const resumed = expectData(await t.gql(UpdateTrigger, { id: made.rawId, input: { status: 'ACTIVE' } }, alice.apiKey)).updateTrigger;
    expect(resumed.status).toBe('ACTIVE');
    expect(resumed.nextScheduledRun).toMatch(/:[0-5][05]:00\.000Z$/);
    const byHand = expectData(await t.gql(UpdateTrigger, { id: made.id, input: { schedule: null } }, alice.apiKey)).updateTrigger;
    expect(byHand).toMatchObject({ schedule: null, nextScheduledRun: null, status: 'ACTIVE' });
    expectGraphQLError(await t.gql(DeleteTrigger, { id: made.id }, bob.apiKey), 'NOT_FOUND');
    expect(expectData(await t.gql(DeleteTrigger, { id: made.id }, alice.apiKey)).deleteTrigger).toBe(true);
    expectGraphQLError(await t.gql(DeleteTrigger, { id: made.id }, alice.apiKey), 'NOT_FOUND');
  });

  it('runTrigger runs it now (CONFLICT while it runs); the run shows its session and the agent’s reply', async () => {
    const agent = await f.agent(alice);
    const made = expectData(
      await t.gql(CreateTrigger, { agentId: agent.id, input: { name: 'Now', prompt: 'Say hello' } }, alice.apiKey),
    ).createTrigger;
    // The reply is held until the test has seen the run under way.
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    llm.choose((request) =>
      request.body.messages.some((m) => m.content === 'Say hello') ? { tokens: ['Hello', '.'], gate: () => held } : undefined,
    );
    const run = expectData(await t.gql(RunTrigger, { id: made.id }, alice.apiKey)).runTrigger;
    expect(run).toMatchObject({ status: 'RUNNING', scheduledFor: null });
    expectGraphQLError(await t.gql(RunTrigger, { id: made.id }, alice.apiKey), 'CONFLICT');
    release();

    let seen = expectData(await t.gql(TriggerRuns, { id: made.id }, alice.apiKey)).node;
    for (let i = 0; i < 500 && seen && 'status' in seen && seen.status === 'RUNNING'; i++) {
      await pause(20);
      seen = expectData(await t.gql(TriggerRuns, { id: made.id }, alice.apiKey)).node;
    }
    if (!seen || !('runs' in seen)) throw new Error('not a trigger');
    expect(seen.status).toBe('ACTIVE');
    const [edge] = seen.runs.edges;
    expect(edge!.node).toMatchObject({
      rawId: run.rawId,
      status: 'COMPLETED',
      error: null,
      session: { title: 'Now' },
      message: { role: 'ASSISTANT', status: 'COMPLETE' },
    });
    expect(edge!.node.message!.content.length).toBeGreaterThan(0);
  });
});

describe('GraphQL trigger schedules as TriggerSchedule shows them', () => {
  it('createTrigger and updateTrigger take back the schedule read, whole or as its cron; a disagreeing pair or a far date is refused, naming it', async () => {
    const carol = await t.createUser();
    const agent = await f.agent(carol);
    const create = (schedule: Record<string, unknown>) =>
      t.gql(CreateTrigger, { agentId: agent.id, input: { prompt: 'Read back', schedule } }, carol.apiKey);
    const byCron = expectData(await create({ cron: '0 9 * * mon-fri', timezone: 'Europe/Paris' })).createTrigger;
    expect(byCron.schedule).toMatchObject({ second: '0', minute: '0', hour: '9', dayOfWeek: 'mon-fri', cron: '0 9 * * mon-fri' });
    // The whole schedule as read (startDate and endDate null, cron beside the fields).
    const whole = expectData(await create(byCron.schedule!)).createTrigger;
    expect(whole.schedule).toEqual(byCron.schedule);
    expect(whole.nextScheduledRun).toBe(byCron.nextScheduledRun);
    const updated = expectData(
      await t.gql(UpdateTrigger, { id: whole.id, input: { schedule: { cron: '30 15 8 * * *' } } }, carol.apiKey),
    ).updateTrigger;
    expect(updated.schedule).toEqual({ cron: '30 15 8 * * *', timezone: 'UTC' });

    const count = await t.db.trigger.count({ where: { agentId: agent.id } });
    const disagreeing = expectGraphQLError(await create({ cron: '0 9 * * *', hour: '10' }), 'BAD_USER_INPUT');
    expect(disagreeing.extensions?.field).toBe('schedule.hour');
    expect(disagreeing.message).toMatch(/disagrees with cron, whose hour is "9"/);
    const far = expectGraphQLError(await create({ second: '0', startDate: '+275760-09-13T00:00:00Z' }), 'BAD_USER_INPUT');
    expect(far.extensions?.field).toBe('schedule.startDate');
    const yearly = expectGraphQLError(await create({ cron: '0 0 1 1 *', startDate: '9999-06-01T00:00:00Z' }), 'BAD_USER_INPUT');
    expect(yearly).toMatchObject({ extensions: { field: 'schedule.startDate' }, message: expect.stringMatching(/never fires/) });
    const patchFar = expectGraphQLError(
      await t.gql(UpdateTrigger, { id: whole.id, input: { schedule: { second: '0', endDate: '+010000-01-01T00:00:00Z' } } }, carol.apiKey),
      'BAD_USER_INPUT',
    );
    expect(patchFar.extensions?.field).toBe('schedule.endDate');
    expect(await t.db.trigger.count({ where: { agentId: agent.id } })).toBe(count);
  });
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
  // Users of their own: the feed follows every trigger of its caller, and nothing else may run for them.
  let alice: TestUser;
  let bob: TestUser;
  const ws = graphqlWsClients(() => t.url);
  beforeAll(async () => {
    alice = await t.createUser();
    bob = await t.createUser();
  });
  beforeEach(() => {
    llm.choose(null);
    llm.setDefault({ tokens: ['On', ' it.'] });
  });
  afterAll(() => ws.disposeAll());

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
