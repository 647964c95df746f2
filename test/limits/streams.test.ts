import { parse } from 'graphql';
import { afterEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, type SseClient } from '../helpers/sse.ts';

/**
 * What one key may hold open at once, counted in this process: subscriptions of every kind
 * (graphql-ws, GraphQL over SSE, REST event streams) together, and replies being streamed.
 */
const MAX_SUBSCRIPTIONS = 3;
let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let agentId: string;
const ws = graphqlWsClients(() => t.url);
const streams: SseClient[] = [];

const SessionEvents = parse('subscription ($id: ID!) { sessionEvents(sessionId: $id) { seq type } }');
const SendMessage = parse('subscription ($input: SendMessageInput!) { sendMessage(input: $input) { seq type } }');

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Hi', '!'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, limits: { maxSubscriptionsPerKey: MAX_SUBSCRIPTIONS, maxStreamsPerKey: 1 } });
  alice = await t.createUser('alice');
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
