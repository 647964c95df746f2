import { createClient, type Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startFakeOpenAI, type FakeOpenAI } from '../helpers/fake-openai.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { runCli, startServerProcess, type ServerProcess } from '../helpers/process.ts';
import { startRedis, type RedisServer } from '../helpers/redis.ts';
import { openSse } from '../helpers/sse.ts';

/**
 * Two parley processes behind one PostgreSQL and one Redis, as a deployment runs them: a client
 * may watch on one instance what was posted on the other, and move to the other when its
 * instance dies, without losing or repeating an event.
 */
let redis: RedisServer;
let db: Awaited<ReturnType<typeof freshPostgresDatabase>>;
let llm: FakeOpenAI;
let env: Record<string, string>;
let a: ServerProcess;
let b: ServerProcess;
/** The instance the kill tests kill: one a client watches on, one that writes a reply. */
let c: ServerProcess;
let d: ServerProcess;
let key: string;
let agentId: string;
const clients: Client[] = [];

const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

async function startInstance() {
  const server = await startServerProcess({ ...env, LOG_LEVEL: 'warn' });
  await server.waitFor(/parley listening on/);
  return server;
}

async function gql(server: ServerProcess, query: string, variables: Record<string, unknown> = {}) {
  const response = await fetch(`${server.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as { data?: any; errors?: { message: string; extensions?: { code?: string } }[] };
}

function ws(server: ServerProcess, apiKey = key) {
  const client = createClient({
    url: `${server.url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { 'X-Api-Key': apiKey },
    retryAttempts: 0,
    lazy: true,
  });
  clients.push(client);
  return client;
}

interface Event {
  __typename: string;
  seq: number;
  text?: string;
  message?: { id: string; content: string; status: string };
}

const EVENTS = `subscription Events($sessionId: ID!, $after: Seq) {
  sessionEvents(sessionId: $sessionId, after: $after) {
    __typename seq
    ... on ReactionsChanged { messageId }
    ... on AssistantToken { text }
    ... on AssistantMessage { message { id content status } }
    ... on ReplyFailed { message { id content status } }
    ... on PromptEnded { promptId }
  }
}`;

/** Subscribes and collects events; `until` resolves at the first event matching it. */
function watch(client: Client, sessionId: string, after?: number) {
  const events: Event[] = [];
  const waiters: { match: (e: Event) => boolean; resolve: (e: Event) => void }[] = [];
  let closed: (reason: unknown) => void;
  const ended = new Promise<unknown>((resolve) => (closed = resolve));
  const stop = client.subscribe<{ sessionEvents: Event }>(
    { query: EVENTS, variables: { sessionId, after } },
    {
      next: (r) => {
        const e = r.data!.sessionEvents;
        events.push(e);
        for (const w of waiters.splice(0)) w.match(e) ? w.resolve(e) : waiters.push(w);
      },
      error: (e) => closed(e),
      complete: () => closed('complete'),
    },
  );
  return {
    events,
    ended,
    stop,
    until: (match: (e: Event) => boolean) =>
      new Promise<Event>((resolve) => (events.find(match) ? resolve(events.find(match)!) : waiters.push({ match, resolve }))),
  };
}

async function newSession(server: ServerProcess) {
  const response = await fetch(`${server.url}/v2/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ agent_ids: [agentId], content: 'hello' }),
  });
  const { session_id } = (await response.json()) as { session_id: string };
  // The first reply (and its title) settles before the test posts what it watches.
  await expect
    .poll(async () => (await gql(server, `query($id: ID!) { session(id: $id) { title } }`, { id: session_id })).data?.session?.title, {
      timeout: 20_000,
    })
    .toBeTruthy();
  return session_id;
}

/**
 * Waits until the watchers are known to be listening: reacts to the session's first message
 * (which publishes an event) until every one of them has heard a reaction. A subscription
 * takes effect some time after the client asks for it, and only then hears what is published.
 */
async function listening(server: ServerProcess, sessionId: string, ...hear: ((isReaction: (e: Event) => boolean) => Promise<unknown>)[]) {
  const first = await gql(server, `query($id: ID!) { session(id: $id) { messages(first: 1) { edges { node { rawId } } } } }`, {
    id: sessionId,
  });
  const messageId = first.data.session.messages.edges[0].node.rawId;
  let heardAll = false;
  const heard = Promise.all(hear.map((h) => h((e) => e.__typename === 'ReactionsChanged'))).then(() => (heardAll = true));
  while (!heardAll) {
    const reacted = await fetch(`${server.url}/v2/sessions/react`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ message_id: messageId, reaction: 'thumbs_up' }),
    });
    expect(reacted.status).toBe(200);
    await Promise.race([heard, new Promise((r) => setTimeout(r, 250))]);
  }
}

const post = (server: ServerProcess, sessionId: string, content: string) =>
  fetch(`${server.url}/v2/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ session_id: sessionId, content }),
  });

function expectWhole(events: Event[], reply: string) {
  const seqs = events.map((e) => e.seq);
  for (let i = 1; i < seqs.length; i++) expect(seqs[i], `event ${i} follows ${seqs[i - 1]}`).toBe(seqs[i - 1]! + 1);
  const tokens = events
    .filter((e) => e.__typename === 'AssistantToken')
    .map((e) => e.text)
    .join('');
  expect(tokens).toBe(reply);
  expect(events.find((e) => e.__typename === 'AssistantMessage')?.message?.content).toBe(reply);
}

beforeAll(async () => {
  [redis, db, llm] = await Promise.all([startRedis(), freshPostgresDatabase(), startFakeOpenAI({ tokens: ['Hi', '!'] })]);
  // Short beats and checkpoints, so a dead writer is noticed, and its text saved, within the test.
  env = {
    DATABASE_URL: db.url,
    REDIS_URL: redis.url,
    LLM_BASE_URL: llm.baseUrl,
    SHUTDOWN_GRACE_MS: '0',
    INSTANCE_HEARTBEAT_MS: '300',
    REPLY_CHECKPOINT_MS: '100',
  };
  const created = await runCli(['keys', 'create', 'alice', '--json'], env);
  key = JSON.parse(created.stdout).apiKey;
  // Both start at once on the empty database: migrations must not trip over each other.
  [a, b, c, d] = await Promise.all([startInstance(), startInstance(), startInstance(), startInstance()]);
  const agent = await gql(
    a,
    `mutation { createAgent(input: { name: "Echo", key: "echo", description: "Says things back", public: false }) { rawId } }`,
  );
  agentId = agent.data.createAgent.rawId;
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.dispose()));
  for (const s of [a, b, c, d]) s?.child.kill('SIGKILL');
  await llm?.close();
  await redis?.stop();
  await db?.drop().catch(() => {});
});

describe('two instances sharing PostgreSQL and Redis', () => {
  it('say where their events go, at start and in /healthz', async () => {
    for (const server of [a, b]) {
      expect(server.output()).toMatch(/\nevents: Redis at 127\.0\.0\.1:\d+ \(shared by every instance\)\n/);
      const health = await fetch(`${server.url}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: 'ok', events: expect.stringMatching(/^Redis at /) });
    }
  });

  it('a reply posted on one instance streams, token by token, to a subscriber on the other', async () => {
    const sessionId = await newSession(a);
    const tokens = ['Token', ' by', ' token', ' across', ' instances'];
    llm.enqueue({ tokens });
    const watcher = watch(ws(a), sessionId);
    const sse = await openSse(`${a.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': key } });
    await listening(b, sessionId, watcher.until, () => sse.waitFor((f) => f.data?.data?.type === 'reaction'));

    expect((await post(b, sessionId, 'go')).status).toBe(200);
    await watcher.until((e) => e.__typename === 'PromptEnded');
    const live = watcher.events.slice(watcher.events.findIndex((e) => e.__typename === 'PromptStarted'));
    expectWhole(live, tokens.join(''));
    await sse.waitFor((f) => f.data?.data?.type === 'end_prompt');
    expect(sse.frames.filter((f) => f.data?.data?.type === 'assistant_token').map((f) => f.data.data.text)).toEqual(tokens);
    sse.close();
    watcher.stop();

    // A late client resumes from any seq on either instance, over SSE with Last-Event-ID.
    const resumeAt = live[2]!.seq;
    const resumed = await openSse(`${b.url}/v2/sessions/${sessionId}/events`, {
      headers: { 'x-api-key': key, 'last-event-id': String(resumeAt) },
    });
    await resumed.waitFor((f) => f.data?.data?.type === 'end_prompt');
    expect(resumed.frames.filter((f) => f.id !== undefined).map((f) => f.id)).toEqual(
      live.filter((e) => e.seq > resumeAt).map((e) => e.seq),
    );
    resumed.close();
  });

  it('the instance a client streams from is killed mid-reply: resuming on the other loses and repeats nothing', async () => {
    const sessionId = await newSession(b);
    const tokens = 'one two three four five six seven eight'.split(/(?= )/);
    const release = deferred();
    llm.enqueue({ tokens, gate: (i) => (i === 4 ? release.promise : undefined) });
    const watcher = watch(ws(c), sessionId);
    await listening(b, sessionId, watcher.until);
    expect((await post(b, sessionId, 'count')).status).toBe(200);
    await watcher.until((e) => e.text === tokens[3]);

    c.child.kill('SIGKILL');
    await c.exited;
    await watcher.ended;
    const before = watcher.events.slice();
    release.resolve();
    // The reply is finished (on b) while the client has no connection: it all comes from the log.
    const replyId =
      before.find((e) => e.__typename === 'AssistantToken') &&
      (await gql(b, `query($id: ID!) { session(id: $id) { messages(last: 1) { edges { node { id status } } } } }`, { id: sessionId })).data
        .session.messages.edges[0].node.id;
    await expect
      .poll(
        async () =>
          (await gql(b, `query($id: ID!) { session(id: $id) { messages(last: 1) { edges { node { id status } } } } }`, { id: sessionId }))
            .data.session.messages.edges[0].node,
        { timeout: 10_000 },
      )
      .toEqual({ id: replyId, status: 'COMPLETE' });
    const again = watch(ws(a), sessionId, before.at(-1)!.seq);
    await again.until((e) => e.__typename === 'PromptEnded');
    const all = [...before, ...again.events];
    expectWhole(all.slice(all.findIndex((e) => e.__typename === 'PromptStarted')), tokens.join(''));
    again.stop();
  });

  it('the instance writing a reply dies: another saves it as failed with the text it had, and its watchers are told', async () => {
    const sessionId = await newSession(a);
    const hold = deferred();
    llm.enqueue({ tokens: ['half', ' of', ' it', ' and', ' more'], gate: (i) => (i === 3 ? hold.promise : undefined) });
    const watcher = watch(ws(a), sessionId);
    await listening(a, sessionId, watcher.until);
    expect((await post(d, sessionId, 'write on d')).status).toBe(200);
    await watcher.until((e) => e.text === ' it');
    // The text so far reaches the database (checkpoints every 100 ms) before the kill.
    await expect
      .poll(
        async () =>
          (await gql(a, `query($id: ID!) { session(id: $id) { messages(last: 1) { edges { node { content } } } } }`, { id: sessionId }))
            .data.session.messages.edges[0].node.content,
      )
      .toBe('half of it');
    d.child.kill('SIGKILL');
    await d.exited;
    const failed = await watcher.until((e) => e.__typename === 'ReplyFailed');
    expect(failed.message).toMatchObject({ status: 'FAILED', content: 'half of it' });
    await watcher.until((e) => e.__typename === 'PromptEnded');
    hold.resolve();
    watcher.stop();
    // The session is usable: the next prompt is answered, on a live instance.
    llm.enqueue({ tokens: ['still', ' here'] });
    const next = watch(ws(b), sessionId);
    await listening(b, sessionId, next.until);
    expect((await post(b, sessionId, 'are you there?')).status).toBe(200);
    expect((await next.until((e) => e.__typename === 'AssistantMessage')).message?.content).toBe('still here');
    next.stop();
  });

  it('a cancel asked of one instance stops the reply the other is writing', async () => {
    const sessionId = await newSession(a);
    const hold = deferred();
    llm.enqueue({ tokens: ['never', ' finished', ' this'], gate: (i) => (i === 2 ? hold.promise : undefined) });
    const watcher = watch(ws(a), sessionId);
    await listening(b, sessionId, watcher.until);
    expect((await post(b, sessionId, 'long one')).status).toBe(200);
    await watcher.until((e) => e.text === ' finished');
    const cancelled = await fetch(`${a.url}/v2/sessions/${sessionId}/cancel`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(await cancelled.json()).toMatchObject({ success: true, cancelled: 1 });
    const failed = await watcher.until((e) => e.__typename === 'ReplyFailed');
    expect(failed.message).toMatchObject({ status: 'CANCELLED', content: 'never finished' });
    hold.resolve();
    watcher.stop();
  });

  it('a key deleted through one instance closes its sockets on the other', async () => {
    const created = await runCli(['keys', 'create', 'alice', '--json'], env);
    const spare = JSON.parse(created.stdout).apiKey as string;
    const client = ws(b, spare);
    let closed: { code: number; reason: string } | undefined;
    client.on('closed', (e) => (closed = e as { code: number; reason: string }));
    const sessionId = await newSession(a);
    const watcher = watch(client, sessionId);
    await listening(a, sessionId, watcher.until);
    expect(closed).toBeUndefined();
    const removed = await fetch(`${a.url}/apikeys`, {
      method: 'DELETE',
      headers: { 'x-api-key': spare, 'content-type': 'application/json' },
      body: JSON.stringify({ apiKey: spare }),
    });
    expect(removed.status).toBe(200);
    await expect.poll(() => closed?.code, { timeout: 10_000 }).toBe(4403);
  });
});
