import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { parse } from 'graphql';
import WebSocket from 'ws';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.ts';
import { type FakeOpenAI, isMemoryRequest } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsExecute, wsSubscribe } from '../helpers/graphql-ws.ts';
import { type Scrape, scrape } from '../helpers/metrics.ts';
import { newSession, settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, type SseClient, updates } from '../helpers/sse.ts';
import { graphql } from '../graphql/generated/gql.ts';
import { postRaw } from '../graphql/support.ts';

/**
 * Attacks through sessions, their inputs and GraphQL, and the metrics they move (test/observability's
 * metrics, here for its app), on one app: the fake model (whose replies the tests script), 4 tool
 * calls per model call, 4 GraphQL operations in flight per key, a page of messages of 300,000 bytes,
 * production's rate limits for the free and pro tiers, and 3 subscriptions and 1 streamed reply
 * open per key (test/limits' streams, here for its app). Each `describe` was a file of its own
 * that started an app with one of these settings (or nothing set: the offline responder's replies
 * were not what those checked), which the other parts stay well inside; each has users of its own,
 * and counts only its own rows.
 */
let t: TestApp;
let llm: FakeOpenAI;
const PAGE_BYTES = 300_000;
const IN_FLIGHT = 4;
const FLOOD = 120;
const MAX_SUBSCRIPTIONS = 3;
const ws = graphqlWsClients(() => t.url);

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['First', ' answer.'] });
  // Caps below the defaults (8 per model call): the machine running the tests is shared.
  t = await start.app({
    llm: { baseUrl: llm.baseUrl },
    work: { toolCallsPerModelCall: 4, graphqlInFlightPerKey: IN_FLIGHT, messagePageMaxBytes: PAGE_BYTES },
    // Rate limits as in production for the pro tier (graphql-in-flight's flood fits in them, so only
    // the in-flight cap stops it); no other part sends a free key's 300 requests in a window.
    limits: { rate: { perTier: { pro: 1_200, free: 300 } }, maxSubscriptionsPerKey: MAX_SUBSCRIPTIONS, maxStreamsPerKey: 1 },
  });
});
beforeEach(() => llm.reset());
afterAll(() => ws.disposeAll());

const OpsMe = graphql(`
  query OpsMe { me { username } }
`);
const OpsMissingSession = graphql(`
  query OpsMissingSession($id: ID!) { session(id: $id) { id } }
`);
const OpsWatch = graphql(`
  subscription OpsWatch($sessionId: ID!) { sessionEvents(sessionId: $sessionId) { __typename seq } }
`);

// Metrics first: its gauges are read whole, so nothing another part opened may be open yet.
describe('metrics', () => {
  let alice: TestUser;
  let painter: { id: string };
  beforeAll(async () => {
    alice = await t.createUser('alice_metrics');
    await t.services.manna.grant(alice.username, '100', 'subscription');
    painter = await fixtures(t).agent(alice, { name: 'Painter', key: 'painter', tools: { flux_dev: true } });
  });

  /** Scrapes until `check` passes: gauges follow sockets and streams that close in the background. */
  const eventually = (check: (m: Scrape) => void) =>
    vi.waitFor(
      async () => {
        check(await scrape(t.url));
      },
      { timeout: 20_000, interval: 20 },
    );

  const deferred = () => {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    return { promise, resolve };
  };

  const balance = async () => (await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).body.balance as number;

  describe('GET /metrics', () => {
    it('is Prometheus text, served without an API key', async () => {
      const m = await scrape(t.url);
      expect(m.status).toBe(200);
      expect(m.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(m.text).toMatch(/^# HELP parley_http_requests_total /m);
      expect(m.text).toMatch(/^process_resident_memory_bytes \d+/m);
    });

    it('a streamed reply that paints an image moves the request, token, usage and manna counters by what happened', async () => {
      llm.enqueue(
        {
          tokens: ['Painting.'],
          toolCalls: [{ id: 'call_1', name: 'flux_dev', arguments: JSON.stringify({ prompt: 'a fox in a lighthouse', n_samples: 2 }) }],
        },
        { tokens: ['Here', ' it', ' is.'] },
      );
      const balanceBefore = await balance();
      const before = await scrape(t.url);

      const s = await openSse(`${t.url}/v2/sessions`, {
        method: 'POST',
        headers: { 'x-api-key': alice.apiKey, 'content-type': 'application/json' },
        body: JSON.stringify({ agent_ids: [painter.id], content: 'Paint me a fox', stream: true }),
      });
      const events = updates(await s.done);
      expect(events.map((e) => e.type)).toContain('tool_complete');
      const sessionId = events[0].session_id as string;
      expect((await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey })).status).toBe(200);
      const charged = balanceBefore - (await balance());
      expect(charged).toBe(2);

      const after = await scrape(t.url);
      const moved = (name: string, labels?: Record<string, string>) => after.value(name, labels) - before.value(name, labels);
      expect(moved('parley_tokens_streamed_total', { kind: 'content' })).toBe(4);
      expect(moved('parley_llm_tokens_total', { type: 'completion' })).toBe(4);
      expect(moved('parley_manna_charged_total', { tool: 'flux_dev' })).toBe(charged);
      expect(moved('parley_http_requests_total', { route: '/v2/sessions', method: 'POST', status: '200' })).toBe(1);
      expect(moved('parley_http_request_duration_seconds_count', { route: '/v2/sessions', method: 'POST', status: '200' })).toBe(1);
      expect(moved('parley_http_requests_total', { route: '/v2/sessions/:session_id', method: 'GET', status: '200' })).toBe(1);
      expect(moved('parley_http_requests_total', { route: '/v2/creators/me', method: 'GET', status: '200' })).toBe(1);
      // Routes are named by their pattern: no id of a session ever becomes a label.
      expect(after.text).not.toContain(sessionId);
      expect(after.value('parley_replies_streaming')).toBe(0);
    });

    it('counts requests no route matched under one label, whatever their URL', async () => {
      const before = await scrape(t.url);
      await t.rest('GET', '/v2/no-such-thing/123456789');
      await t.rest('GET', '/v2/agents/some-agent', { key: 'not-a-key' });
      const after = await scrape(t.url);
      expect(
        after.value('parley_http_requests_total', { route: 'unmatched', method: 'GET', status: '404' }) -
          before.value('parley_http_requests_total', { route: 'unmatched', method: 'GET', status: '404' }),
      ).toBe(1);
      expect(
        after.value('parley_http_requests_total', { route: '/v2/agents/:agentId', method: 'GET', status: '401' }) -
          before.value('parley_http_requests_total', { route: '/v2/agents/:agentId', method: 'GET', status: '401' }),
      ).toBe(1);
      expect(after.text).not.toContain('123456789');
    });

    it('counts provider failures by kind, once per failed call (after its retry)', async () => {
      const before = await scrape(t.url);
      llm.enqueue({ status: 503 }, { status: 503 });
      const failed = await newSession(t, alice, [painter.id]);
      expect((await settledSession(t, alice, failed)).messages.at(-1)).toMatchObject({ status: 'failed' });
      llm.enqueue({ status: 400 });
      const refused = await newSession(t, alice, [painter.id]);
      expect((await settledSession(t, alice, refused)).messages.at(-1)).toMatchObject({ status: 'failed' });

      const after = await scrape(t.url);
      expect(
        after.value('parley_provider_errors_total', { kind: 'server_error' }) -
          before.value('parley_provider_errors_total', { kind: 'server_error' }),
      ).toBe(1);
      expect(
        after.value('parley_provider_errors_total', { kind: 'refused' }) -
          before.value('parley_provider_errors_total', { kind: 'refused' }),
      ).toBe(1);
      expect(llm.replyRequests()).toHaveLength(3);
    });

    it('shows a reply while it is being written', async () => {
      const hold = deferred();
      llm.enqueue({ tokens: ['Wait', ' for', ' it'], gate: (i) => (i === 1 ? hold.promise : undefined) });
      const sessionId = await newSession(t, alice, [painter.id]);
      await eventually((m) => expect(m.value('parley_replies_streaming')).toBe(1));
      hold.resolve();
      await settledSession(t, alice, sessionId);
      await eventually((m) => expect(m.value('parley_replies_streaming')).toBe(0));
    });

    it('counts GraphQL operations by name, type and outcome, over HTTP and graphql-ws', async () => {
      const before = await scrape(t.url);
      expect((await t.gql(OpsMe, {}, alice.apiKey)).data?.me.username).toBe(alice.username);
      expect((await t.gql(OpsMe, {}, alice.apiKey)).data?.me.username).toBe(alice.username);
      expect((await t.gql(OpsMissingSession, { id: 'nope' }, alice.apiKey)).errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
      expect((await wsExecute(ws.connect(alice.apiKey), OpsMe)).data?.me.username).toBe(alice.username);
      await ws.disposeAll();
      const after = await scrape(t.url);
      const moved = (name: string, labels: Record<string, string>) => after.value(name, labels) - before.value(name, labels);
      expect(moved('parley_graphql_operations_total', { operation: 'OpsMe', type: 'query', outcome: 'ok' })).toBe(3);
      expect(moved('parley_graphql_operation_duration_seconds_count', { operation: 'OpsMe', type: 'query' })).toBe(3);
      expect(moved('parley_graphql_operations_total', { operation: 'OpsMissingSession', type: 'query', outcome: 'error' })).toBe(1);
      // A GraphQL error is still an HTTP 200: the operation's outcome is where it shows.
      expect(moved('parley_http_requests_total', { route: '/graphql', method: 'POST', status: '200' })).toBe(3);
    });

    it('counts open event streams, subscriptions and sockets while they are open, and not after', async () => {
      const sessionId = await newSession(t, alice, [painter.id]);
      await settledSession(t, alice, sessionId);
      await eventually((m) => expect(m.value('parley_event_subscribers')).toBe(0));

      const sse = await openSse(`${t.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': alice.apiKey } });
      const client = ws.connect(alice.apiKey);
      const sub = wsSubscribe(client, OpsWatch, { sessionId });
      await eventually((m) => {
        expect(m.value('parley_sse_streams_open')).toBe(1);
        expect(m.value('parley_graphql_subscriptions_open')).toBe(1);
        expect(m.value('parley_graphql_ws_sockets_open')).toBe(1);
        expect(m.value('parley_event_subscribers')).toBe(2);
      });
      const m = await scrape(t.url);
      expect(m.value('parley_graphql_operations_total', { operation: 'OpsWatch', type: 'subscription', outcome: 'ok' })).toBe(1);

      sse.close();
      sub.unsubscribe();
      await ws.disposeAll();
      await eventually((m) => {
        expect(m.value('parley_sse_streams_open')).toBe(0);
        expect(m.value('parley_graphql_subscriptions_open')).toBe(0);
        expect(m.value('parley_graphql_ws_sockets_open')).toBe(0);
        expect(m.value('parley_event_subscribers')).toBe(0);
      });
    });
  });
});

describe('share-snapshot', () => {
  let alice: TestUser;
  beforeAll(async () => {
    alice = await t.createUser('alice_share');
  });

  describe('a public share', () => {
    it('shows exactly what existed when it was made: not a reply still being written then, nor later reactions', async () => {
      const agent = await fixtures(t).agent(alice, { name: 'Echo', key: 'echo-share' });
      const first = await t.rest('POST', '/v2/sessions', {
        key: alice.apiKey,
        body: { agent_ids: [agent.id], content: 'hello', title: 'Shared' },
      });
      const sessionId = first.body.session_id as string;
      const before = await settledSession(t, alice, sessionId);
      const firstReply = before.messages.at(-1);
      await t.rest('POST', '/v2/sessions/react', { key: alice.apiKey, body: { message_id: firstReply.id, reaction: 'thumbs_up' } });

      // A second reply is being written when the session is shared.
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      // Chosen by its prompt, not by the order of the calls: the two replies below start together,
      // and on a busy machine the second one's call can reach the model first.
      llm.choose((r) =>
        !isMemoryRequest(r) && r.body.messages.filter((m) => m.role === 'user').at(-1)?.content === 'and now?'
          ? { tokens: ['Written', ' after', ' sharing'], gate: (i) => (i === 1 ? held : undefined) }
          : undefined,
      );
      expect(
        (await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: 'and now?' } })).status,
      ).toBe(200);
      // The share is made while that reply is being written (a prompt sent now would wait for it:
      // a session answers one prompt at a time unless told otherwise, docs/sessions.md).
      await expect
        .poll(async () => {
          const { messages } = (await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey })).body;
          return messages.filter((m: { status: string }) => m.status === 'streaming').length;
        })
        .toBe(1);
      const made = await t.rest('POST', `/v2/sessions/${sessionId}/share`, { key: alice.apiKey });
      expect(made.status).toBe(201);
      const shareId = made.body.share.share_id as string;
      const read = async () => (await t.rest('GET', `/v2/sessions/share/${shareId}`)).body.share;
      const atShare = await read();

      release();
      const after = await settledSession(t, alice, sessionId);
      expect(after.messages.find((m: { content: string }) => m.content === 'Written after sharing')).toMatchObject({ status: 'complete' });
      await t.rest('POST', '/v2/sessions/react', { key: alice.apiKey, body: { message_id: firstReply.id, reaction: '🔥' } });

      const later = await read();
      expect(later).toEqual(atShare);
      expect(later.messages.map((m: { content: string }) => m.content)).not.toContain('Written after sharing');
      expect(later.messages.map((m: { content: string }) => m.content)).toEqual([
        expect.stringMatching(/joined the session/),
        'hello',
        'First answer.',
        'and now?',
      ]);
      expect(later.messages[2].reactions).toEqual([{ reaction: 'thumbs_up', count: 1 }]);
    });
  });
});

describe('revocation', () => {
  let alice: TestUser;
  let mallory: TestUser;
  beforeAll(async () => {
    alice = await t.createUser('alice_revoking');
    mallory = await t.createUser('mallory');
    await t.services.manna.grant(alice.username, '100', 'subscription');
  });

  const balanceOf = async (user: TestUser) => (await t.rest('GET', '/v2/creators/me', { key: user.apiKey })).body.balance as number;
  const paidCall = {
    id: 'call_paint',
    name: 'flux_schnell',
    arguments: JSON.stringify({ prompt: 'a gift', n_samples: 1, resolution: '1024x1024' }),
  };

  describe('an agent made private', () => {
    it("stops answering a stranger's existing session, and stops charging its owner", async () => {
      const patron = await fixtures(t).agent(alice, {
        name: 'Patron',
        key: 'patron-private',
        ownerPays: 'full',
        tools: { flux_schnell: true },
      });
      llm.enqueue({ toolCalls: [paidCall] }, { tokens: ['On me.'] });
      const started = await t.rest('POST', '/v2/sessions', {
        key: mallory.apiKey,
        body: { agent_ids: [patron.id], content: 'paint me a gift' },
      });
      expect(started.status, JSON.stringify(started.body)).toBe(200);
      const sessionId = started.body.session_id as string;
      await settledSession(t, mallory, sessionId);
      const charged = await balanceOf(alice);
      expect(charged).toBeLessThan(100);

      expect((await t.rest('PATCH', `/v2/agents/${patron.id}`, { key: alice.apiKey, body: { public: false } })).status).toBe(200);
      expect((await t.rest('GET', `/v2/agents/${patron.id}`, { key: mallory.apiKey })).status).toBeGreaterThanOrEqual(400);
      const modelCalls = llm.replyRequests().length;

      // Mallory posts again, to the session at large and to the agent by name: both refused.
      llm.enqueue({ toolCalls: [paidCall] }, { tokens: ['On me again.'] });
      const again = await t.rest('POST', '/v2/sessions', { key: mallory.apiKey, body: { session_id: sessionId, content: 'another one' } });
      expect(again.status).toBe(403);
      expect(again.body.message).toMatch(/no longer usable/);
      const named = await t.rest('POST', '/v2/sessions', {
        key: mallory.apiKey,
        body: { session_id: sessionId, agent_ids: [patron.id], content: 'another one' },
      });
      expect(named.status).toBe(403);
      expect(named.body.message).toMatch(/no longer usable/);

      const after = await settledSession(t, mallory, sessionId);
      expect(after.messages.filter((m: { role: string }) => m.role === 'user')).toHaveLength(1);
      expect(llm.replyRequests().length).toBe(modelCalls);
      expect(await balanceOf(alice)).toBe(charged);

      // Its owner still may use it in a session of her own.
      llm.reset();
      const own = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [patron.id], content: 'hello' } });
      expect(own.status).toBe(200);
      const mine = await settledSession(t, alice, own.body.session_id);
      expect(mine.messages.at(-1)).toMatchObject({ role: 'assistant', status: 'complete' });
    });
  });

  describe('the hidden paid helper prompt_enhance', () => {
    it("is never offered, nor run, unless the agent's owner turned it on", async () => {
      const patron = await fixtures(t).agent(alice, {
        name: 'Helper',
        key: 'helper-off',
        ownerPays: 'full',
        tools: { flux_schnell: true },
      });
      const before = await balanceOf(alice);
      llm.reset();
      // A model asking for it anyway (it knows the name) is told there is no such tool; nobody pays.
      llm.enqueue(
        { toolCalls: [{ id: 'call_enhance', name: 'prompt_enhance', arguments: '{"prompt":"cat","max_tokens":500}' }] },
        { tokens: ['Ok.'] },
      );
      const res = await t.rest('POST', '/v2/sessions', { key: mallory.apiKey, body: { agent_ids: [patron.id], content: 'enhance' } });
      expect(res.status).toBe(200);
      const done = await settledSession(t, mallory, res.body.session_id);
      const offered = llm.replyRequests()[0]!.body.tools!.map((x) => x.function.name);
      expect(offered).toEqual(['flux_schnell']);
      const reply = done.messages.find((m: { role: string }) => m.role === 'assistant');
      expect(reply.tool_calls[0]).toMatchObject({
        tool: 'prompt_enhance',
        status: 'failed',
        error: expect.stringMatching(/no tool named/),
      });
      expect(await balanceOf(alice)).toBe(before);

      // Turned on by its owner, it is offered, and charges her as owner_pays says.
      expect(
        (await t.rest('PATCH', `/v2/agents/${patron.id}`, { key: alice.apiKey, body: { tools: { prompt_enhance: true } } })).status,
      ).toBe(200);
      llm.reset();
      llm.enqueue(
        { toolCalls: [{ id: 'call_enhance', name: 'prompt_enhance', arguments: '{"prompt":"cat","max_tokens":500}' }] },
        { tokens: ['Ok.'] },
      );
      const on = await t.rest('POST', '/v2/sessions', { key: mallory.apiKey, body: { agent_ids: [patron.id], content: 'enhance' } });
      await settledSession(t, mallory, on.body.session_id);
      expect(llm.replyRequests()[0]!.body.tools!.map((x) => x.function.name)).toContain('prompt_enhance');
      expect(await balanceOf(alice)).toBe(before - 0.5);
    });
  });
});

describe('tool-burst', () => {
  let alice: TestUser;
  beforeAll(async () => {
    alice = await t.createUser('alice_burst');
    await t.services.manna.grant(alice.username, '1000', 'subscription');
  });

  const paint = (i: number) => ({
    id: `call_${i}`,
    name: 'flux_schnell',
    arguments: JSON.stringify({ prompt: `lighthouse number ${i} at dusk`, n_samples: 6, resolution: '1024x1024' }),
  });

  describe('a burst of paid image tools in one model call', () => {
    it('runs only as many as the caps allow, tells the model about the rest, and /healthz answers 200 all along', async () => {
      const agent = await fixtures(t).agent(alice, { name: 'Painter', key: 'painter-burst', tools: { flux_schnell: true } });
      llm.enqueue({ toolCalls: Array.from({ length: 16 }, (_, i) => paint(i)) }, { tokens: ['All painted.'] });
      const started = await t.rest('POST', '/v2/sessions', {
        key: alice.apiKey,
        body: { agent_ids: [agent.id], content: 'paint 16 lighthouses' },
      });
      expect(started.status).toBe(200);
      const sessionId = started.body.session_id as string;

      const health: number[] = [];
      let settled = false;
      const polling = (async () => {
        for (let i = 0; i < 2_000 && !settled; i++) {
          health.push((await fetch(`${t.url}/healthz`)).status);
          await new Promise((r) => setTimeout(r, 25));
        }
      })();
      const done = await settledSession(t, alice, sessionId);
      settled = true;
      await polling;

      expect(health.length).toBeGreaterThan(0);
      expect(health.filter((s) => s !== 200)).toEqual([]);
      const reply = done.messages.find((m: { role: string }) => m.role === 'assistant');
      expect(reply.status).toBe('complete');
      const calls = reply.tool_calls as { status: string; error: string | null }[];
      expect(calls).toHaveLength(16);
      expect(calls.slice(0, 4).map((c) => c.status)).toEqual(Array(4).fill('completed'));
      for (const c of calls.slice(4))
        expect(c).toMatchObject({ status: 'failed', error: expect.stringMatching(/at most 4 run per model call/) });
      // Four calls of six images each were made and charged; the other twelve cost nothing.
      expect(await t.db.creation.count({ where: { userId: alice.id, tool: 'flux_schnell' } })).toBe(24);
      expect((await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).body.balance).toBe(1000 - 4 * 6 * 0.25);
      // The model was told which calls did not run, and why.
      const told = llm
        .replyRequests()[1]!
        .body.messages.filter((m) => m.role === 'tool')
        .map((m) => JSON.parse(m.content!));
      expect(told.filter((r) => /at most 4 run per model call/.test(r.error ?? ''))).toHaveLength(12);
    });

    it('a reply keeps to its total of tool calls over several model calls', async () => {
      const small = await startTestApp({ llm: { baseUrl: llm.baseUrl }, work: { toolCallsPerReply: 3 } });
      try {
        const bob = await small.createUser('bob');
        await small.services.manna.grant('bob', '100', 'subscription');
        const agent = await fixtures(small).agent(bob, { name: 'Painter', key: 'painter-reply', tools: { flux_schnell: true } });
        const one = (i: number) => ({
          ...paint(i),
          arguments: JSON.stringify({ prompt: `tiny ${i}`, n_samples: 1, resolution: '1024x1024' }),
        });
        llm.reset();
        llm.enqueue({ toolCalls: [one(1), one(2)] }, { toolCalls: [one(3), one(4)] }, { tokens: ['Enough.'] });
        const res = await small.rest('POST', '/v2/sessions', { key: bob.apiKey, body: { agent_ids: [agent.id], content: 'paint' } });
        const done = await settledSession(small, bob, res.body.session_id);
        const calls = done.messages.find((m: { role: string }) => m.role === 'assistant').tool_calls as { status: string; error: string }[];
        expect(calls.map((c) => c.status)).toEqual(['completed', 'completed', 'completed', 'failed']);
        expect(calls[3]!.error).toMatch(/at most 3 run per reply/);
      } finally {
        await small.close();
      }
    });
  });
});

/**
 * Free-form JSON nested far deeper than any real input, as one client can send it: a list in a
 * list 20,000 times is 40 kB of body. Every walk of it that recurses (serialising, measuring,
 * storing, parsing a GraphQL document) overflowed the stack and answered 500. Each input that
 * takes free-form JSON refuses it first, with a 400 naming the limit, and keeps nothing.
 */
describe('deep-json', () => {
  let alice: TestUser;
  beforeAll(async () => {
    alice = await t.createUser('alice');
    await t.services.manna.grant(alice.username, '100', 'forever');
  });

  /** A list within a list `levels` times, around 1, as JSON text (built as text: the test's own stringify would overflow). */
  const nestedList = (levels: number) => `${'['.repeat(levels)}1${']'.repeat(levels)}`;
  /** The same as a GraphQL literal. */
  const nestedObject = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
  const DEEP = 20_000;
  /** The limits, as docs/security.md states them: free-form JSON, a whole body, a GraphQL document's brackets. */
  const MAX_JSON_DEPTH = 32;
  const MAX_BODY_DEPTH = 64;
  const MAX_DOCUMENT_NESTING = 64;
  const fieldLimit = new RegExp(`must not nest objects and lists more than ${MAX_JSON_DEPTH} levels deep`);
  const bodyLimit = `The request body nests objects and lists more than ${MAX_BODY_DEPTH} levels deep`;

  const post = (path: string, json: string, key: string | null = alice.apiKey) =>
    t.rest('POST', path, { key, rawBody: json, headers: { 'content-type': 'application/json' } });
  const balance = async () => (await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).body.balance;

  // Where free-form JSON is refused without the app (a tool call's arguments, a line of a search
  // import) is test/domain/json-depth.test.ts's; here, what each route and GraphQL answer.
  describe('task arguments nested too deep', () => {
    it.each(['/v2/tasks/create', '/v2/tasks/cost'])('on %s are a 400 naming the limit, and nothing is made or held', async (path) => {
      const before = { tasks: await t.db.task.count(), balance: await balance() };
      // Far past any body's depth: refused as the body is read.
      const deep = await post(path, `{"tool":"flux_dev","args":{"prompt":${nestedList(DEEP)}}}`);
      expect(deep).toMatchObject({ status: 400, body: { error: 'Bad Request', message: bodyLimit } });
      // Within a body's depth but past the arguments': refused naming them.
      const past = await post(path, `{"tool":"flux_dev","args":{"prompt":${nestedList(MAX_JSON_DEPTH)}}}`);
      expect(past.status, JSON.stringify(past.body)).toBe(400);
      expect(past.body.error).toMatch(new RegExp(`^args: ${fieldLimit.source}$`));
      // At the limit, the depth is no objection: the tool's own rule for the prompt speaks.
      const within = await post(path, `{"tool":"flux_dev","args":{"prompt":${nestedList(MAX_JSON_DEPTH - 1)}}}`);
      expect(within.status).toBe(400);
      expect(within.body.error).toMatch(/^args\.prompt: must be text/);
      expect({ tasks: await t.db.task.count(), balance: await balance() }).toEqual(before);
    });
  });

  describe('every route that reads a JSON body', () => {
    it('answers a body nested 20,000 deep with a 400 naming the limit, never a 5xx', async () => {
      const agent = await fixtures(t).agent(alice);
      const writing = t.routes.flatMap(({ method, url }) =>
        [method]
          .flat()
          .filter((m) => m === 'POST' || m === 'PATCH' || m === 'PUT')
          .map((m) => ({ method: m, url })),
      );
      expect(writing.length).toBeGreaterThan(20);
      for (const { method, url } of writing) {
        const path = url.replace(/:[A-Za-z]+/g, (name) => (name === ':agentId' || name === ':id' ? agent.id : 'x'));
        const res = await t.rest(method, path, {
          key: alice.apiKey,
          rawBody: `{"config":${nestedList(DEEP)},"args":${nestedList(DEEP)}}`,
          headers: { 'content-type': 'application/json' },
        });
        expect({ route: `${method} ${url}`, status: res.status, said: JSON.stringify(res.body).includes(bodyLimit) }).toEqual({
          route: `${method} ${url}`,
          status: 400,
          said: true,
        });
      }
    });

    it('takes a deployment config and agent tools nested deep no further than the body', async () => {
      const agent = await fixtures(t).agent(alice);
      const deploy = await post(`/v2/agents/${agent.id}/deployments`, `{"platform":"telegram","config":{"telegram":${nestedList(DEEP)}}}`);
      expect(deploy).toMatchObject({ status: 400, body: { error: 'Bad Request', message: bodyLimit } });
      const tools = await t.rest('PATCH', `/v2/agents/${agent.id}`, {
        key: alice.apiKey,
        rawBody: `{"tools":${nestedObject(DEEP)}}`,
        headers: { 'content-type': 'application/json' },
      });
      expect(tools.status).toBe(400);
      expect(JSON.stringify(tools.body)).toContain(bodyLimit);
      expect(await t.db.deployment.count({ where: { agentId: agent.id } })).toBe(0);
    });
  });

  describe('GraphQL JSON arguments nested too deep', () => {
    const estimate = `query Estimate($args: JSON) { estimateTaskCost(tool: "flux_dev", args: $args) }`;

    it('a literal list nested 2,000 deep, under the token limit and sent with no key, is refused before it is parsed', async () => {
      // 4,001 tokens: under the limit of 5,000.
      const res = await postRaw(t, { query: `{ estimateTaskCost(tool: "flux_dev", args: {prompt: ${nestedList(2_000)}}) }` }, null);
      expect(res.status).toBe(400);
      expect(res.json.errors).toEqual([
        {
          message: `Nesting limit of ${MAX_DOCUMENT_NESTING} exceeded: braces, brackets and parentheses nest deeper.`,
          extensions: { code: 'NESTING_LIMIT_EXCEEDED' },
        },
      ]);
    });

    it('a literal or a variable past the JSON limit is refused naming it; at the limit it reaches the tool’s rules', async () => {
      const literal = await postRaw(
        t,
        { query: `{ estimateTaskCost(tool: "flux_dev", args: {prompt: ${nestedList(MAX_JSON_DEPTH)}}) }` },
        alice.apiKey,
      );
      expect(literal.json.errors[0].message).toMatch(fieldLimit);
      const variable = await postRaw(
        t,
        `{"query":${JSON.stringify(estimate)},"variables":{"args":{"prompt":${nestedList(MAX_JSON_DEPTH)}}}}`,
        alice.apiKey,
      );
      expect(variable.status).toBe(400);
      expect(variable.json.errors[0].message).toMatch(fieldLimit);
      const within = await postRaw(
        t,
        `{"query":${JSON.stringify(estimate)},"variables":{"args":{"prompt":${nestedList(MAX_JSON_DEPTH - 2)}}}}`,
        alice.apiKey,
      );
      expect(within.json.errors[0]).toMatchObject({
        message: expect.stringMatching(/must be text/),
        extensions: { code: 'BAD_USER_INPUT' },
      });
      const body = await postRaw(t, `{"query":${JSON.stringify(estimate)},"variables":{"args":${nestedList(DEEP)}}}`, alice.apiKey);
      expect(body.status).toBe(400);
      expect(body.text).toContain(bodyLimit);
    });

    it('over graphql-ws, where no body parser stands first: a deep document or variable is refused and the socket goes on', async () => {
      const client = ws.connect(alice.apiKey);
      const run = (query: string, variables?: Record<string, unknown>) =>
        new Promise<{ errors?: { message: string; extensions?: { code?: string } }[]; data?: unknown }>((resolve) => {
          let result: { errors?: { message: string }[]; data?: unknown } = {};
          client.subscribe(
            { query, variables },
            {
              next: (r) => (result = r as typeof result),
              error: (errors) => resolve({ errors: errors as never }),
              complete: () => resolve(result),
            },
          );
        });
      const document = await run(`{ estimateTaskCost(tool: "flux_dev", args: {prompt: ${nestedList(2_000)}}) }`);
      expect(document.errors?.[0]?.extensions?.code).toBe('NESTING_LIMIT_EXCEEDED');
      // No client's JSON.stringify writes it: the message goes as text, over a socket of its own.
      const variable = await new Promise<string>((resolve, reject) => {
        const socket = new WebSocket(`${t.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
        socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { 'X-Api-Key': alice.apiKey } })));
        socket.on('message', (data) => {
          const message = JSON.parse(String(data));
          if (message.type === 'connection_ack')
            socket.send(
              `{"id":"1","type":"subscribe","payload":{"query":${JSON.stringify(estimate)},"variables":{"args":{"prompt":${nestedList(DEEP)}}}}}`,
            );
          else if (message.type === 'next' || message.type === 'error') {
            resolve(String(data));
            socket.close();
          }
        });
        socket.on('error', reject);
      });
      expect(variable).toMatch(fieldLimit);
      expect(await run('{ me { username } }')).toEqual({ data: { me: { username: 'alice' } } });
    });
  });
});

describe('reactions', () => {
  let alice: TestUser;
  let sessionId: string;
  let replyId: string;
  const editors: TestUser[] = [];
  beforeAll(async () => {
    alice = await t.createUser('alice_reacting');
    const agent = await fixtures(t).agent(alice, { name: 'Echo', key: 'echo-react' });
    const res = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [agent.id], content: 'hello' } });
    sessionId = res.body.session_id;
    replyId = (await settledSession(t, alice, sessionId)).messages.at(-1).id;
    for (let i = 0; i < 12; i++) {
      const u = await t.createUser(`editor${i}`);
      await t.rest('POST', `/v2/sessions/${sessionId}/users`, { key: alice.apiKey, body: { username: u.username, permission: 'editor' } });
      editors.push(u);
    }
  });

  const react = (user: TestUser, reaction: string) =>
    t.rest('POST', '/v2/sessions/react', { key: user.apiKey, body: { message_id: replyId, reaction } });
  const ALLOWED = ['thumbs_up', 'pin', '🔥', '🎉', '❤️', '👀', '🚀', '💯', '✅', '⭐'];

  describe('reactions', () => {
    it('are a closed set: names outside it are refused and change nothing', async () => {
      for (const reaction of ['x', 'lol', '<script>', '🦄', 'thumbs-up']) {
        const res = await react(alice, reaction);
        expect(res.status).toBe(400);
        expect(res.body.message).toMatch(/^reaction: must be one of thumbs_up thumbs_down pin /);
      }
      expect(await t.db.reaction.count({ where: { messageId: replyId } })).toBe(0);
    });

    it('at most 10 per user and message; one more is refused (422), a toggle off still works', async () => {
      for (const r of ALLOWED) expect((await react(alice, r)).status).toBe(200);
      const eleventh = await react(alice, '😊');
      expect(eleventh.status).toBe(422);
      expect(eleventh.body.message).toMatch(/at most 10 reactions per user on one message/);
      expect(await t.db.reaction.count({ where: { messageId: replyId, userId: alice.id } })).toBe(10);
      expect((await react(alice, 'pin')).status).toBe(200);
      expect(await t.db.reaction.count({ where: { messageId: replyId, userId: alice.id } })).toBe(9);
      // Ten at once cannot pass the cap either.
      const burst = await Promise.all(['pin', '😊', '🤔', '🙏', '👏'].map((r) => react(alice, r)));
      expect(burst.filter((r) => r.status === 200)).toHaveLength(1);
      expect(await t.db.reaction.count({ where: { messageId: replyId, userId: alice.id } })).toBe(10);
    });

    it("a watcher receives each change with the message's totals, never the whole map: traffic grows with the number of reactions, not its square", async () => {
      const watch = await openSse(`${t.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': alice.apiKey } });
      let requests = 0;
      // Twelve users give ten reactions each: 120 requests (before: each event carried every reaction so far).
      for (let round = 0; round < 1; round++) {
        await Promise.all(
          editors.map(async (u) => {
            for (const r of ALLOWED) {
              expect((await react(u, r)).status).toBe(200);
              requests++;
            }
          }),
        );
      }
      await watch.waitFor(() => updates(watch.frames).filter((e) => e.type === 'reaction').length >= requests);
      watch.close();
      const events = updates(watch.frames).filter((e) => e.type === 'reaction');
      expect(events).toHaveLength(requests);
      const sizes = watch.frames.filter((f) => f.data?.data?.type === 'reaction').map((f) => JSON.stringify(f.data).length);
      // The largest event holds at most one user's ten reactions and a total per reaction in the set.
      expect(Math.max(...sizes)).toBeLessThan(2_000);
      const last = events.at(-1);
      expect(Object.keys(last.reactions)).toEqual([last.user]);
      // Every editor has all ten, alice her own.
      const totals = Object.fromEntries(last.counts.map((c: { reaction: string; count: number }) => [c.reaction, c.count]));
      const mine = (await t.db.reaction.findMany({ where: { messageId: replyId, userId: alice.id } })).map((r) => r.reaction);
      for (const r of ALLOWED) expect(totals[r]).toBe(12 + (mine.includes(r) ? 1 : 0));
      const stored = await settledSession(t, alice, sessionId);
      expect(Object.keys(stored.messages.at(-1).reactions)).toHaveLength(13);
    });
  });
});

describe('bounded-reads', () => {
  let alice: TestUser;
  let sessionId: string;
  const big = (i: number) => `${i}:`.padEnd(100_000, 'x');
  beforeAll(async () => {
    alice = await t.createUser('alice_pages');
    const agent = await fixtures(t).agent(alice, { name: 'Echo', key: 'echo-pages' });
    const first = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [agent.id], content: big(0) } });
    sessionId = first.body.session_id;
    await settledSession(t, alice, sessionId);
    for (let i = 1; i < 6; i++) {
      expect((await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: big(i) } })).status).toBe(
        200,
      );
      await settledSession(t, alice, sessionId);
    }
  });

  describe('a page of messages', () => {
    it('stops before its byte budget whatever the limit asked for; the cursors walk every message, each whole', async () => {
      const res = await fetch(`${t.url}/v2/sessions/${sessionId}?limit=200`, { headers: { 'x-api-key': alice.apiKey } });
      const text = await res.text();
      expect(res.status).toBe(200);
      // Three 100,000-character prompts fit in 300,000 bytes with the short replies; six would not.
      // (The body carries the page twice: in the original's `session.messages` and in `messages`.)
      const textBytes = (messages: { content: string }[]) => messages.reduce((n, m) => n + Buffer.byteLength(m.content), 0);
      expect(textBytes(JSON.parse(text).messages)).toBeLessThanOrEqual(PAGE_BYTES);
      expect(text.length).toBeLessThan(2 * PAGE_BYTES + 50_000);
      const latest = JSON.parse(text);
      expect(latest.page.hasOlder).toBe(true);
      const seen: { role: string; content: string }[] = [...latest.messages];
      let cursor = latest.page.olderCursor;
      let page = latest.page;
      for (let reads = 0; page.hasOlder && reads < 20; reads++) {
        const older = await t.rest('GET', `/v2/sessions/${sessionId}?limit=200&before=${encodeURIComponent(cursor)}`, {
          key: alice.apiKey,
        });
        expect(older.status).toBe(200);
        expect(textBytes(older.body.messages)).toBeLessThanOrEqual(PAGE_BYTES);
        seen.unshift(...older.body.messages);
        page = older.body.page;
        cursor = page.olderCursor;
      }
      expect(page.hasOlder).toBe(false);
      const prompts = seen.filter((m) => m.role === 'user').map((m) => m.content);
      expect(prompts).toEqual([0, 1, 2, 3, 4, 5].map(big));

      // Forwards too, over GraphQL-equivalent REST paging with `after`.
      const forwards = await t.rest(
        'GET',
        `/v2/sessions/${sessionId}?limit=200&after=${encodeURIComponent(cursor ?? latest.page.olderCursor)}`,
        {
          key: alice.apiKey,
        },
      );
      expect(forwards.status).toBe(200);
      expect(forwards.body.messages.length).toBeGreaterThan(0);
      expect(textBytes(forwards.body.messages)).toBeLessThanOrEqual(PAGE_BYTES);
      expect(forwards.body.page.hasNewer).toBe(true);
    });

    it('holds one message even when that one alone is over the budget', async () => {
      const small = await startTestApp({ work: { messagePageMaxBytes: 1_000 } });
      try {
        const bob = await small.createUser('bob');
        const agent = await fixtures(small).agent(bob, { name: 'Echo', key: 'echo-one' });
        const res = await small.rest('POST', '/v2/sessions', { key: bob.apiKey, body: { agent_ids: [agent.id], content: big(9) } });
        await settledSession(small, bob, res.body.session_id);
        // The latest page is the short reply alone: the prompt before it would pass the budget.
        const latest = await small.rest('GET', `/v2/sessions/${res.body.session_id}?limit=50`, { key: bob.apiKey });
        expect(latest.body.messages.map((m: { role: string }) => m.role)).toEqual(['assistant']);
        const before = encodeURIComponent(latest.body.page.olderCursor);
        const read = await small.rest('GET', `/v2/sessions/${res.body.session_id}?limit=50&before=${before}`, { key: bob.apiKey });
        expect(read.body.messages.map((m: { content: string }) => m.content)).toEqual([big(9)]);
        expect(read.body.page.hasOlder).toBe(true);
      } finally {
        await small.close();
      }
    });
  });
});

describe('graphql-in-flight', () => {
  let pro: TestUser;
  const sockets: WebSocket[] = [];
  beforeAll(async () => {
    pro = await t.createUser('pro');
    await t.db.user.update({ where: { id: pro.id }, data: { subscriptionTier: 'pro' } });
  });
  afterEach(() => {
    for (const ws of sockets.splice(0)) ws.terminate();
  });

  /** A graphql-ws socket past connection_init that collects every message. */
  async function socketFor(key: string) {
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
    sockets.push(ws);
    const messages: { id?: string; type: string; payload?: any }[] = [];
    ws.on('message', (data) => messages.push(JSON.parse(String(data))));
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    ws.send(JSON.stringify({ type: 'connection_init', payload: { 'X-Api-Key': key } }));
    for (let i = 0; i < 200 && !messages.some((m) => m.type === 'connection_ack'); i++) await new Promise((r) => setTimeout(r, 10));
    return { ws, messages };
  }

  /** Heavy for the CPU (introspection, run in one go) and for the database (awaited), with the caller's id to check. */
  const heavy =
    '{ me { rawId username } __schema { types { name fields { name } } } sessions(first: 50) { edges { node { id title } } } sharedSessions(first: 50) { edges { node { id } } } deployments { id } triggers { id } }';

  describe('one key flooding heavy operations', () => {
    it('has at most its share executing: the rest are refused with TOO_MANY_IN_FLIGHT, every one is answered, /healthz stays up', async () => {
      const { ws, messages } = await socketFor(pro.apiKey);
      for (let i = 0; i < FLOOD; i++) ws.send(JSON.stringify({ id: `q${i}`, type: 'subscribe', payload: { query: heavy } }));
      const health: number[] = [];
      const ended = () => messages.filter((m) => m.type === 'complete' || m.type === 'error');
      for (let i = 0; i < 400 && ended().length < FLOOD; i++) {
        health.push((await fetch(`${t.url}/healthz`)).status);
        await new Promise((r) => setTimeout(r, 10));
      }
      const results = messages.filter((m) => m.type === 'next');
      expect(ended()).toHaveLength(FLOOD);
      // Refused as they arrive, before they are parsed or run.
      const refused = messages.filter((m) => m.type === 'error' && m.payload[0]?.extensions?.code === 'TOO_MANY_IN_FLIGHT');
      const answered = results.filter((m) => m.payload.data?.me?.rawId === pro.id);
      // Past WS_MAX_OPERATIONS (100) unanswered on the socket, an operation is refused before it executes.
      const overSocket = messages.filter((m) => m.type === 'error' && m.payload[0]?.extensions?.code === 'TOO_MANY_OPERATIONS');
      expect(refused.length + answered.length + overSocket.length).toBe(FLOOD);
      expect(refused.length).toBeGreaterThan(0);
      expect(answered.length).toBeGreaterThanOrEqual(IN_FLIGHT);
      expect(refused[0]!.payload[0].message).toMatch(/at most 4/);
      expect(health.filter((s) => s !== 200)).toEqual([]);

      // Over HTTP, the same key is answered again once its operations are done; 429 while they run.
      const after = await fetch(`${t.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': pro.apiKey },
        body: JSON.stringify({ query: '{ me { rawId } }' }),
      });
      expect(after.status).toBe(200);
      expect((await after.json()).data.me.rawId).toBe(pro.id);
    });

    it('counts HTTP and WebSocket operations of a key together, and other keys not at all', async () => {
      const other = await t.createUser('other');
      const { ws, messages } = await socketFor(pro.apiKey);
      for (let i = 0; i < 40; i++) ws.send(JSON.stringify({ id: `q${i}`, type: 'subscribe', payload: { query: heavy } }));
      const post = (key: string) =>
        fetch(`${t.url}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': key },
          body: JSON.stringify({ query: heavy }),
        });
      const [mine, theirs] = await Promise.all([Promise.all(Array.from({ length: 20 }, () => post(pro.apiKey))), post(other.apiKey)]);
      expect(theirs.status).toBe(200);
      const statuses = mine.map((r) => r.status);
      expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
      for (let i = 0; i < 400 && messages.filter((m) => m.type === 'complete' || m.type === 'error').length < 40; i++)
        await new Promise((r) => setTimeout(r, 10));
      const wsRefused = messages.filter((m) => m.type === 'error' && m.payload[0]?.extensions?.code === 'TOO_MANY_IN_FLIGHT');
      // 60 operations of one key at once against a limit of 4: many were refused, on one transport or both.
      expect(statuses.filter((s) => s === 429).length + wsRefused.length).toBeGreaterThan(0);
      const body = await mine.find((r) => r.status === 429)?.json();
      if (body) expect(body.errors[0].extensions.code).toBe('TOO_MANY_IN_FLIGHT');
    });
  });
});

describe('streams', () => {
  let alice: TestUser;
  let agentId: string;
  const streams: SseClient[] = [];
  const SessionEvents = parse('subscription ($id: ID!) { sessionEvents(sessionId: $id) { seq type } }');
  const SendMessage = parse('subscription ($input: SendMessageInput!) { sendMessage(input: $input) { seq type } }');
  beforeAll(async () => {
    alice = await t.createUser('alice_streams');
    agentId = (await fixtures(t).agent(alice)).id;
  });
  afterEach(async () => {
    for (const s of streams.splice(0)) s.close();
    await ws.disposeAll();
  });

  async function newSession(user: TestUser) {
    return (await t.services.sessions.send({ id: user.id }, { agentIds: [agentId] })).sessionId;
  }

  async function sse(path: string, key: string, init: RequestInit = {}) {
    const stream = await openSse(`${t.url}${path}`, { ...init, headers: { 'x-api-key': key, ...init.headers } });
    streams.push(stream);
    return stream;
  }

  /** A GraphQL subscription over SSE (Yoga's), as a browser client would open it. */
  const graphqlSse = (key: string, query: string, variables: object) =>
    sse('/graphql', key, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query, variables }),
    });

  describe('open subscriptions per key', () => {
    it(`at most ${MAX_SUBSCRIPTIONS}, over graphql-ws sockets and SSE together; the next is refused on every transport until one closes`, async () => {
      const session = await newSession(alice);
      const watching = t.services.bus.subscriberCount();
      const first = wsSubscribe(ws.connect(alice.apiKey), SessionEvents, { id: session });
      wsSubscribe(ws.connect(alice.apiKey), SessionEvents, { id: session });
      const events = await sse(`/v2/sessions/${session}/events`, alice.apiKey);
      expect(events.status).toBe(200);
      await expect.poll(() => t.services.bus.subscriberCount()).toBe(watching + 3);

      const rest = await t.rest('GET', `/v2/sessions/${session}/events`, { key: alice.apiKey });
      expect(rest.status).toBe(429);
      expect(rest.body).toEqual({
        message: `Too many open subscriptions and event streams for this API key (at most ${MAX_SUBSCRIPTIONS}); close one first`,
      });

      const overWs = wsSubscribe(ws.connect(alice.apiKey), SessionEvents, { id: session });
      const [refused] = await overWs.ended;
      expect(refused?.errors?.[0]?.extensions?.code).toBe('TOO_MANY_SUBSCRIPTIONS');

      const overSse = await graphqlSse(alice.apiKey, 'subscription ($id: ID!) { sessionEvents(sessionId: $id) { seq } }', { id: session });
      const frame = await overSse.waitFor((f) => Boolean(f.data?.errors));
      expect(frame.data.errors[0].extensions.code).toBe('TOO_MANY_SUBSCRIPTIONS');
      expect(t.services.bus.subscriberCount()).toBe(watching + 3);

      // Another key of the same user has slots of its own.
      const { apiKey: second } = await t.services.apiKeys.create(alice.id);
      expect((await sse(`/v2/sessions/${session}/events`, second)).status).toBe(200);

      // Unsubscribing gives the slot back.
      first.unsubscribe();
      await expect.poll(async () => (await sse(`/v2/sessions/${session}/events`, alice.apiKey)).status).toBe(200);
    });

    it('a socket that closes gives back its subscriptions, and so does a client that leaves an SSE stream', async () => {
      const bob = await t.createUser('bob');
      const session = await newSession(bob);
      const watching = t.services.bus.subscriberCount();
      const client = ws.connect(bob.apiKey);
      for (let i = 0; i < MAX_SUBSCRIPTIONS - 1; i++) wsSubscribe(client, SessionEvents, { id: session });
      await expect.poll(() => t.services.bus.subscriberCount()).toBe(watching + MAX_SUBSCRIPTIONS - 1);
      const last = await sse(`/v2/sessions/${session}/events`, bob.apiKey);
      expect(last.status).toBe(200);
      expect((await sse(`/v2/sessions/${session}/events`, bob.apiKey)).status).toBe(429);
      await ws.disposeAll();
      last.close();
      for (let i = 0; i < MAX_SUBSCRIPTIONS; i++)
        await expect.poll(async () => (await sse(`/v2/sessions/${session}/events`, bob.apiKey)).status).toBe(200);
    });
  });

  describe('replies streaming per key', () => {
    it('one at a time here: a second stream is refused over REST and GraphQL, and saves no prompt; sending without stream still works', async () => {
      let open!: () => void;
      const held = new Promise<void>((resolve) => (open = resolve));
      llm.enqueue({ tokens: ['Slow', ' reply'], gate: () => held });
      const session = await newSession(alice);
      const streaming = await sse('/v2/sessions', alice.apiKey, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ session_id: session, content: 'first', stream: true }),
      });
      expect(streaming.status).toBe(200);
      await streaming.waitFor((f) => f.data?.data?.type === 'start_prompt');
      const messages = () => t.db.message.count({ where: { sessionId: session } });
      const before = await messages();

      const second = await t.rest('POST', '/v2/sessions', {
        key: alice.apiKey,
        body: { session_id: session, content: 'second', stream: true },
      });
      expect(second.status).toBe(429);
      expect(second.body).toEqual({
        message:
          'Too many replies streaming for this API key (at most 1 at once); wait for one to end, or send without stream and watch the session',
      });
      const [refused] = await wsSubscribe(ws.connect(alice.apiKey), SendMessage, { input: { sessionId: session, content: 'third' } }).ended;
      expect(refused?.errors?.[0]?.extensions?.code).toBe('TOO_MANY_STREAMS');
      expect(await messages()).toBe(before);

      const plain = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: session, content: 'fourth' } });
      expect(plain.status).toBe(200);

      open();
      await streaming.waitFor((f) => f.event === 'done');
      await expect
        .poll(
          async () =>
            (await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: session, content: 'fifth', stream: true } }))
              .status,
        )
        .toBe(200);
    });
  });
});
