import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsExecute, wsSubscribe } from '../helpers/graphql-ws.ts';
import { scrape, type Scrape } from '../helpers/metrics.ts';
import { newSession, settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, updates } from '../helpers/sse.ts';
import { graphql } from '../graphql/generated/gql.ts';

let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let painter: { id: string };
const ws = graphqlWsClients(() => t.url);

const OpsMe = graphql(`
  query OpsMe { me { username } }
`);
const OpsMissingSession = graphql(`
  query OpsMissingSession($id: ID!) { session(id: $id) { id } }
`);
const OpsWatch = graphql(`
  subscription OpsWatch($sessionId: ID!) { sessionEvents(sessionId: $sessionId) { __typename seq } }
`);

setUp(async (start) => {
  llm = await start.fakeOpenAI();
  t = await start.app({ llm: { baseUrl: llm.baseUrl } });
  alice = await t.createUser('alice');
  await t.services.manna.grant('alice', '100', 'subscription');
  painter = await fixtures(t).agent(alice, { name: 'Painter', key: 'painter', tools: { flux_dev: true } });
});
beforeEach(() => llm.reset());
afterAll(async () => {
  await ws.disposeAll();
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
      after.value('parley_provider_errors_total', { kind: 'refused' }) - before.value('parley_provider_errors_total', { kind: 'refused' }),
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
    expect((await t.gql(OpsMe, {}, alice.apiKey)).data?.me.username).toBe('alice');
    expect((await t.gql(OpsMe, {}, alice.apiKey)).data?.me.username).toBe('alice');
    expect((await t.gql(OpsMissingSession, { id: 'nope' }, alice.apiKey)).errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expect((await wsExecute(ws.connect(alice.apiKey), OpsMe)).data?.me.username).toBe('alice');
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
