import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { expectRejectsBadKeys, isoDate } from '../helpers/rest-helpers.ts';
import { newSession, settledSession } from '../helpers/sessions.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { schemaProblems } from '../helpers/openapi.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, type SseClient } from '../helpers/sse.ts';

// The trigger routes as an integration calls them: bodies in the original's spelling, the
// earlier operation-16 fields beside them, errors in the agents' style. Firing on a schedule is
// test/triggers/firing.test.ts.

let t: TestApp;
let llm: FakeOpenAI;
let f: ReturnType<typeof fixtures>;
let alice: TestUser;
let bob: TestUser;

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Here', '.'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, triggers: { minIntervalS: 5, perUser: 6, runTimeoutS: 900 } });
  f = fixtures(t);
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
});

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const weekdayMornings = { second: '0', minute: '0', hour: '9', day_of_week: '1-5', timezone: 'America/New_York' };
const triggerKeys = [
  '_id',
  'agent',
  'context',
  'createdAt',
  'error_count',
  'id',
  'last_error',
  'last_run',
  'last_run_time',
  'name',
  'next_run',
  'next_scheduled_run',
  'prompt',
  'runs',
  'schedule',
  'session',
  'session_target',
  'status',
  'trigger_prompt',
  'updatedAt',
  'user',
];

describe('REST triggers', () => {
  it('refuse every bad key on every route', async () => {
    const agent = await f.agent(alice);
    for (const [method, path] of [
      ['GET', `/v2/agents/${agent.id}/triggers`],
      ['POST', `/v2/agents/${agent.id}/triggers`],
      ['GET', `/v2/agents/${agent.id}/triggers/x`],
      ['PATCH', `/v2/agents/${agent.id}/triggers/x`],
      ['DELETE', `/v2/agents/${agent.id}/triggers/x`],
      ['POST', `/v2/agents/${agent.id}/triggers/x/run`],
    ])
      expect(await expectRejectsBadKeys(t, method!, path!, method === 'POST' || method === 'PATCH' ? {} : undefined)).toBe(true);
  });

  it('are made with the original’s fields, listed by operation 16 with the next run, read, changed, paused, resumed and deleted', async () => {
    alice = await t.createUser();
    const agent = await f.agent(alice, { name: 'Herald' });
    const made = await t.rest('POST', `/v2/agents/${agent.id}/triggers`, {
      key: alice.apiKey,
      body: { name: 'Morning digest', instruction: 'Summarise the news', context: 'Keep it short', schedule: weekdayMornings },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    expect(Object.keys(made.body).sort()).toEqual(['trigger', 'triggerId']);
    const trigger = made.body.trigger;
    expect(Object.keys(trigger).sort()).toEqual(triggerKeys);
    expect(trigger).toMatchObject({
      _id: made.body.triggerId,
      id: made.body.triggerId,
      name: 'Morning digest',
      agent: agent.id,
      user: alice.id,
      prompt: 'Summarise the news',
      trigger_prompt: 'Summarise the news',
      context: 'Keep it short',
      schedule: {
        second: '0',
        minute: '0',
        hour: '9',
        day_of_month: '*',
        month: '*',
        day_of_week: '1-5',
        timezone: 'America/New_York',
        start_date: null,
        end_date: null,
        cron: '0 9 * * 1-5',
      },
      session_target: 'new',
      session: null,
      status: 'active',
      last_run_time: null,
      last_run: null,
      error_count: 0,
      last_error: null,
      runs: [],
      createdAt: isoDate,
    });
    // 09:00 in New York is 13:00 or 14:00 UTC, on a weekday, in the future.
    const next = new Date(trigger.next_scheduled_run);
    expect(next.getTime()).toBeGreaterThan(Date.now());
    expect([13, 14]).toContain(next.getUTCHours());
    expect([1, 2, 3, 4, 5]).toContain(new Date(next.getTime() - 5 * 3600_000).getUTCDay());
    expect(trigger.next_run).toBe(trigger.next_scheduled_run);

    const listed = await t.rest('GET', '/v2/agents/triggers', { key: alice.apiKey });
    expect(listed.status).toBe(200);
    expect(listed.body.triggers).toEqual([trigger]);
    expect((await t.rest('GET', `/v2/agents/${agent.id}/triggers`, { key: alice.apiKey })).body).toEqual({ triggers: [trigger] });
    expect((await t.rest('GET', `/v2/agents/${agent.id}/triggers/${trigger.id}`, { key: alice.apiKey })).body).toEqual({ trigger });

    const renamed = await t.rest('PATCH', `/v2/agents/${agent.id}/triggers/${trigger.id}`, {
      key: alice.apiKey,
      body: { name: 'Evening digest', trigger_prompt: 'Summarise the day', schedule: { second: '0', minute: '30', hour: '18' } },
    });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    expect(renamed.body.trigger).toMatchObject({
      name: 'Evening digest',
      prompt: 'Summarise the day',
      schedule: { cron: '30 18 * * *', timezone: 'UTC' },
    });
    expect(new Date(renamed.body.trigger.next_scheduled_run).toISOString()).toMatch(/T18:30:00\.000Z$/);

    const paused = await t.rest('PATCH', `/v2/agents/${agent.id}/triggers/${trigger.id}`, {
      key: alice.apiKey,
      body: { status: 'paused' },
    });
    expect(paused.body.trigger).toMatchObject({ status: 'paused', next_scheduled_run: null, next_run: null });
    const resumed = await t.rest('PATCH', `/v2/agents/${agent.id}/triggers/${trigger.id}`, {
      key: alice.apiKey,
      body: { status: 'active' },
    });
    expect(resumed.body.trigger).toMatchObject({ status: 'active', next_scheduled_run: renamed.body.trigger.next_scheduled_run });

    expect((await t.rest('DELETE', `/v2/agents/${agent.id}/triggers/${trigger.id}`, { key: alice.apiKey })).body).toEqual({
      success: true,
    });
    const gone = await t.rest('GET', `/v2/agents/${agent.id}/triggers/${trigger.id}`, { key: alice.apiKey });
    expect(gone).toMatchObject({ status: 404, body: { error: 'Trigger not found' } });
    expect((await t.rest('DELETE', `/v2/agents/${agent.id}/triggers/${trigger.id}`, { key: alice.apiKey })).status).toBe(404);
  });

  it('take the prompt as prompt, trigger_prompt or instruction, and a schedule of null as by hand only', async () => {
    alice = await t.createUser();
    const agent = await f.agent(alice);
    for (const [field, text] of [
      ['prompt', 'A'],
      ['trigger_prompt', 'B'],
      ['instruction', 'C'],
    ]) {
      const res = await t.rest('POST', `/v2/agents/${agent.id}/triggers`, { key: alice.apiKey, body: { [field!]: text, schedule: null } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.trigger).toMatchObject({
        prompt: text,
        name: 'Untitled Task',
        schedule: null,
        next_scheduled_run: null,
        status: 'active',
      });
    }
  });

  it('are only the agent owner’s: a stranger is told what a private agent tells them, and nothing is made or changed', async () => {
    alice = await t.createUser();
    const publicAgent = await f.agent(alice, { public: true });
    const privateAgent = await f.agent(alice, { public: false });
    const mine = await t.rest('POST', `/v2/agents/${publicAgent.id}/triggers`, {
      key: alice.apiKey,
      body: { prompt: 'Mine', schedule: null },
    });
    const before = await t.db.trigger.count();
    const onPublic = await t.rest('POST', `/v2/agents/${publicAgent.id}/triggers`, {
      key: bob.apiKey,
      body: { prompt: 'Hi', schedule: null },
    });
    const onPrivate = await t.rest('POST', `/v2/agents/${privateAgent.id}/triggers`, {
      key: bob.apiKey,
      body: { prompt: 'Hi', schedule: null },
    });
    const seenPrivate = await t.rest('GET', `/v2/agents/${privateAgent.id}`, { key: bob.apiKey });
    expect(onPublic).toMatchObject({ status: seenPrivate.status, body: seenPrivate.body });
    expect(onPrivate).toMatchObject({ status: seenPrivate.status, body: seenPrivate.body });
    expect(onPublic).toMatchObject({ status: 401, body: { error: 'You do not have access to this agent' } });
    const id = mine.body.triggerId;
    for (const [method, path, body] of [
      ['GET', `/v2/agents/${publicAgent.id}/triggers`, undefined],
      ['GET', `/v2/agents/${publicAgent.id}/triggers/${id}`, undefined],
      ['PATCH', `/v2/agents/${publicAgent.id}/triggers/${id}`, { name: 'Taken' }],
      ['DELETE', `/v2/agents/${publicAgent.id}/triggers/${id}`, undefined],
      ['POST', `/v2/agents/${publicAgent.id}/triggers/${id}/run`, undefined],
    ] as const)
      expect(await t.rest(method, path, { key: bob.apiKey, body }), `${method} ${path}`).toMatchObject({ status: 401 });
    expect((await t.rest('GET', '/v2/agents/triggers', { key: bob.apiKey })).body).toEqual({ triggers: [] });
    // Under another agent of hers, her trigger is not found.
    const other = await f.agent(alice);
    expect((await t.rest('GET', `/v2/agents/${other.id}/triggers/${id}`, { key: alice.apiKey })).status).toBe(404);
    expect((await t.rest('POST', '/v2/agents/nope/triggers', { key: alice.apiKey, body: { prompt: 'x', schedule: null } })).body).toEqual({
      error: 'Agent not found',
    });
    expect(await t.db.trigger.count()).toBe(before);
    expect((await t.db.trigger.findUniqueOrThrow({ where: { id } })).name).toBe('Untitled Task');
    expect(await t.db.triggerRun.count({ where: { triggerId: id } })).toBe(0);
  });

  // What a schedule may say is the triggers' rule (test/rules/triggers.test.ts, "what a schedule may
  // say"); here, that a refusal is a 400 {error} naming the field as REST spells it.
  it.each([
    [
      { prompt: 'x', schedule: { second: '0', minute: '0', hour: '0', day_of_month: '30', month: '2' } },
      /^schedule\.day_of_month: never fires/,
    ],
    [{ prompt: 'x' }, /^schedule: is required/],
    [{ schedule: null }, /^prompt: /],
    [{ prompt: 'x', schedule: null, session_target: 'existing' }, /^session: is required/],
    [{ prompt: 'x', schedule: null, session_target: 'sometimes' }, /^session_target: /],
  ])('%j is a 400 naming the field, and makes nothing', async (body, message) => {
    alice = await t.createUser();
    const agent = await f.agent(alice);
    const res = await t.rest('POST', `/v2/agents/${agent.id}/triggers`, { key: alice.apiKey, body });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(Object.keys(res.body)).toEqual(['error']);
    expect(res.body.error).toMatch(message);
    expect(await t.db.trigger.count({ where: { agentId: agent.id } })).toBe(0);
  });

  it('refuse a schedule closer than TRIGGER_MIN_INTERVAL_S apart, and more than TRIGGERS_PER_USER triggers', async () => {
    const carol = await t.createUser('carol');
    const agent = await f.agent(carol);
    const made = [];
    for (let i = 0; i < 6; i++)
      made.push(
        (await t.rest('POST', `/v2/agents/${agent.id}/triggers`, { key: carol.apiKey, body: { prompt: `n${i}`, schedule: null } })).status,
      );
    expect(made).toEqual([200, 200, 200, 200, 200, 200]);
    const seventh = await t.rest('POST', `/v2/agents/${agent.id}/triggers`, { key: carol.apiKey, body: { prompt: 'n7', schedule: null } });
    expect(seventh).toMatchObject({ status: 422, body: { error: 'Trigger limit reached: a user may have at most 6 triggers' } });
  });

  it('post into an existing session only when it is yours with the agent in it', async () => {
    alice = await t.createUser();
    const agent = await f.agent(alice);
    const sessionId = await newSession(t, alice, [agent.id]);
    const bobsSession = await newSession(t, bob, [agent.id]);
    const refused = await t.rest('POST', `/v2/agents/${agent.id}/triggers`, {
      key: alice.apiKey,
      body: { prompt: 'x', schedule: null, session: bobsSession },
    });
    expect(refused).toMatchObject({ status: 400, body: { error: 'session: must be one of your sessions' } });
    const made = await t.rest('POST', `/v2/agents/${agent.id}/triggers`, {
      key: alice.apiKey,
      body: { prompt: 'Into it', schedule: null, session: sessionId },
    });
    expect(made.body.trigger, JSON.stringify(made.body)).toMatchObject({ session_target: 'existing', session: sessionId });
  });

  it('run now: the prompt goes into a new session titled after the trigger as the owner’s message, the run links its reply; 409 while it runs', async () => {
    alice = await t.createUser();
    const agent = await f.agent(alice, { name: 'Runner' });
    const made = await t.rest('POST', `/v2/agents/${agent.id}/triggers`, {
      key: alice.apiKey,
      body: { name: 'Roll call', prompt: 'Who is here?', schedule: null },
    });
    const path = `/v2/agents/${agent.id}/triggers/${made.body.triggerId}`;
    // The reply is held until the test has seen the run under way.
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    llm.choose((request) =>
      request.body.messages.some((m) => m.content === 'Who is here?') ? { tokens: ['Here', '.'], gate: () => held } : undefined,
    );
    const ran = await t.rest('POST', `${path}/run`, { key: alice.apiKey });
    expect(ran.status, JSON.stringify(ran.body)).toBe(200);
    expect(Object.keys(ran.body).sort()).toEqual(['run', 'trigger']);
    expect(ran.body.run).toMatchObject({ status: 'running', scheduled_for: null, error: null });
    expect(ran.body.trigger.status).toBe('running');
    const again = await t.rest('POST', `${path}/run`, { key: alice.apiKey });
    expect(again).toMatchObject({ status: 409, body: { error: 'This trigger is already running' } });
    release();

    let trigger = ran.body.trigger;
    for (let i = 0; i < 500 && trigger.status === 'running'; i++) {
      await pause(20);
      trigger = (await t.rest('GET', path, { key: alice.apiKey })).body.trigger;
    }
    expect(trigger).toMatchObject({ status: 'active', error_count: 0, last_run_time: isoDate });
    const [run] = trigger.runs;
    expect(run).toMatchObject({ id: ran.body.run.id, status: 'completed', message_id: expect.any(String), session_id: expect.any(String) });
    const session = await settledSession(t, alice, run.session_id);
    expect(session.session.title).toBe('Roll call');
    const [prompt, reply] = session.messages.filter((m: { role: string }) => m.role === 'user' || m.role === 'assistant');
    expect(prompt).toMatchObject({ role: 'user', content: 'Who is here?', sender: expect.objectContaining({ _id: alice.id }) });
    expect(reply).toMatchObject({ id: run.message_id, role: 'assistant', status: 'complete' });
  });
});

describe('REST trigger schedules as responses show them', () => {
  const post = (agentId: string, key: string, schedule: unknown) =>
    t.rest('POST', `/v2/agents/${agentId}/triggers`, { key, body: { prompt: 'Read back', schedule } });

  it('take back the schedule a response showed, whole or as its cron alone (5 or 6 fields), on POST and PATCH', async () => {
    const carol = await t.createUser();
    const agent = await f.agent(carol);
    const made = await post(agent.id, carol.apiKey, weekdayMornings);
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    const shown = made.body.trigger.schedule;
    expect(shown.cron).toBe('0 9 * * 1-5');

    // The whole object, cron and all, as it came.
    const whole = await post(agent.id, carol.apiKey, shown);
    expect(whole.status, JSON.stringify(whole.body)).toBe(200);
    expect(whole.body.trigger.schedule).toEqual(shown);
    expect(whole.body.trigger.next_scheduled_run).toBe(made.body.trigger.next_scheduled_run);
    // Its cron alone, in its zone: the same schedule.
    const cronOnly = await post(agent.id, carol.apiKey, { cron: shown.cron, timezone: shown.timezone });
    expect(cronOnly.status, JSON.stringify(cronOnly.body)).toBe(200);
    expect(cronOnly.body.trigger.schedule).toEqual(shown);
    // Six fields, the second first; and split fields beside it that say the same in other words.
    const six = await post(agent.id, carol.apiKey, { cron: '30 15 8 * * *', second: '30', hour: '08' });
    expect(six.body.trigger?.schedule, JSON.stringify(six.body)).toMatchObject({
      second: '30',
      minute: '15',
      hour: '8',
      cron: '30 15 8 * * *',
    });

    const path = `/v2/agents/${agent.id}/triggers/${whole.body.triggerId}`;
    const patched = await t.rest('PATCH', path, { key: carol.apiKey, body: { schedule: { cron: '30 18 * * *' } } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.trigger.schedule).toMatchObject({ second: '0', minute: '30', hour: '18', day_of_week: '*', cron: '30 18 * * *' });
    expect(patched.body.trigger.next_scheduled_run).toMatch(/T18:30:00\.000Z$/);
    const again = await t.rest('PATCH', path, { key: carol.apiKey, body: { schedule: patched.body.trigger.schedule } });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.trigger.schedule).toEqual(patched.body.trigger.schedule);
  });

  it.each([
    [{ cron: '0 9 * * 1-5', day_of_week: 'sat' }, /^schedule\.day_of_week: disagrees with cron, whose day of week is "1-5"/],
    [{ cron: '0 9 * *' }, /^schedule\.cron: must have 5 fields .* or 6/],
  ])('schedule %j is a 400 naming the fields, and makes nothing', async (schedule, message) => {
    const carol = await t.createUser();
    const agent = await f.agent(carol);
    const res = await post(agent.id, carol.apiKey, schedule);
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.error).toMatch(message);
    expect(await t.db.trigger.count({ where: { agentId: agent.id } })).toBe(0);
  });

  it.each([[{ second: '0', end_date: '+010000-01-01T00:00:00Z' }, /^schedule\.end_date: must be a date from 1970-01-01 to 9999-12-31/]])(
    'a far date %j is a 400 naming the field; sent again, still nothing is made or counted',
    async (schedule, message) => {
      const dave = await t.createUser();
      const agent = await f.agent(dave);
      for (let i = 0; i < 3; i++) {
        const res = await post(agent.id, dave.apiKey, schedule);
        expect(res.status, JSON.stringify(res.body)).toBe(400);
        expect(res.body.error).toMatch(message);
      }
      expect(await t.db.trigger.count({ where: { userId: dave.id } })).toBe(0);
      // The cap is untouched: all six of the user's triggers can still be made.
      for (let i = 0; i < 6; i++) expect((await post(agent.id, dave.apiKey, null)).status).toBe(200);
      // And a PATCH to such a date changes nothing.
      const [kept] = (await t.rest('GET', `/v2/agents/${agent.id}/triggers`, { key: dave.apiKey })).body.triggers;
      const patch = await t.rest('PATCH', `/v2/agents/${agent.id}/triggers/${kept.id}`, { key: dave.apiKey, body: { schedule } });
      expect(patch.status, JSON.stringify(patch.body)).toBe(400);
      expect(patch.body.error).toMatch(message);
      expect((await t.rest('GET', `/v2/agents/${agent.id}/triggers/${kept.id}`, { key: dave.apiKey })).body.trigger).toEqual(kept);
    },
  );
});

describe('GET /v2/agents/triggers/events', () => {
  // Users of their own, under the cap of triggers the tests above count against.
  let alice: TestUser;
  let bob: TestUser;
  const streams: SseClient[] = [];
  beforeAll(async () => {
    alice = await t.createUser();
    bob = await t.createUser();
  });
  afterAll(() => {
    for (const s of streams.splice(0)) s.close();
  });
  /** Resolves once `count` more subscriptions are open on the bus than `before`. */
  const subscribed = (before: number, count = 1) => expect.poll(() => t.services.bus.subscriberCount()).toBe(before + count);
  const byHand = (user: TestUser, agentId: string, prompt: string) =>
    t.rest('POST', `/v2/agents/${agentId}/triggers`, { key: user.apiKey, body: { name: prompt, prompt, schedule: null } });

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
