import { type Client, createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startFakeOpenAI, type FakeOpenAI } from '../helpers/fake-openai.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { runCli, type ServerProcess, startServerProcess, trackChild } from '../helpers/process.ts';
import { startRedisServer, type ThrowawayServer } from '../helpers/servers.ts';
import { openSse, type SseClient, updates } from '../helpers/sse.ts';

/**
 * The attack: two instances on PostgreSQL and Redis; Redis goes down; alice removes bob from a
 * session and carol deletes a key, both through instance A, while bob watches the session over
 * SSE and carol over graphql-ws on instance B. Before, both changes answered 500 (yet were
 * written), and once Redis was back bob and carol kept receiving new messages and carol's socket
 * stayed open. Now both answer 200, and neither watcher receives anything posted afterwards.
 */
let redis: ThrowawayServer;
let redisPort: number;
let db: Awaited<ReturnType<typeof freshPostgresDatabase>>;
let llm: FakeOpenAI;
let a: ServerProcess;
let b: ServerProcess;
let env: Record<string, string>;
const keys: Record<string, string> = {};
const users: Record<string, string> = {};
const sse: SseClient[] = [];
const sockets: Client[] = [];

async function key(name: string) {
  const created = JSON.parse((await runCli(['keys', 'create', name, '--json'], env)).stdout);
  return { id: created.userId as string, apiKey: created.apiKey as string };
}

const rest = async (server: ServerProcess, method: string, path: string, apiKey: string, body?: unknown) => {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { 'x-api-key': apiKey, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: response.status, body: await response.json().catch(() => null) };
};

const healthy = async (server: ServerProcess) => (await fetch(`${server.url}/healthz`).catch(() => null))?.status === 200;

beforeAll(async () => {
  [redis, db, llm] = await Promise.all([startRedisServer(), freshPostgresDatabase(), startFakeOpenAI({ tokens: ['Ok', '.'] })]);
  trackChild(redis.child);
  redisPort = Number(new URL(redis.url).port);
  env = { DATABASE_URL: db.url, REDIS_URL: redis.url, LLM_BASE_URL: llm.baseUrl, SHUTDOWN_GRACE_MS: '0', LOG_LEVEL: 'warn' };
  for (const name of ['alice', 'bob', 'carol']) {
    const k = await key(name);
    keys[name] = k.apiKey;
    users[name] = k.id;
  }
  keys.carolSpare = (await key('carol')).apiKey;
  [a, b] = await Promise.all([startServerProcess(env), startServerProcess(env)]);
  await Promise.all([a.waitFor(/parley listening on/), b.waitFor(/parley listening on/)]);
});

afterAll(async () => {
  for (const s of sse) s.close();
  await Promise.all(sockets.map((s) => s.dispose()));
  for (const server of [a, b]) server?.child.kill('SIGKILL');
  redis?.stop();
  await db?.drop();
  await llm?.close();
});

describe('revocations while Redis is down', () => {
  it('answer 200, and nothing posted once Redis is back reaches the removed user or the deleted key; the socket closes', async () => {
    const agent = await rest(a, 'POST', '/graphql', keys.alice!, {
      query: 'mutation { createAgent(input: { name: "Scribe", key: "scribe", public: true }) { rawId } }',
    });
    expect(agent.body.data.createAgent.rawId).toBeTruthy();
    const started = await rest(a, 'POST', '/v2/sessions', keys.alice!, {
      agent_ids: [agent.body.data.createAgent.rawId],
      content: 'hello',
    });
    const sessionId = started.body.session_id as string;
    for (const name of ['bob', 'carol'])
      expect((await rest(a, 'POST', `/v2/sessions/${sessionId}/users`, keys.alice!, { username: name, permission: 'editor' })).status).toBe(
        200,
      );

    // bob watches over SSE on B; carol over graphql-ws on B.
    const bobStream = await openSse(`${b.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': keys.bob! } });
    sse.push(bobStream);
    expect(bobStream.status).toBe(200);
    let closedWith: number | null = null;
    const carolEvents: unknown[] = [];
    let carolEnded: unknown = null;
    const carol = createClient({
      url: `${b.url.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { 'X-Api-Key': keys.carol },
      retryAttempts: 0,
      on: { closed: (e) => (closedWith = (e as { code: number }).code) },
    });
    sockets.push(carol);
    carol.subscribe(
      {
        query: 'subscription($id: ID!) { sessionEvents(sessionId: $id) { __typename seq ... on PromptStarted { message { content } } } }',
        variables: { id: sessionId },
      },
      { next: (r) => carolEvents.push(r), error: (e) => (carolEnded = e), complete: () => (carolEnded = 'complete') },
    );
    // Both are listening once each has heard a message posted now (a subscription takes effect
    // some time after it is asked for).
    const heard = () =>
      JSON.stringify(carolEvents).includes('are you there?') && JSON.stringify(updates(bobStream.frames)).includes('are you there?');
    for (let i = 0; i < 40 && !heard(); i++) {
      expect((await rest(a, 'POST', '/v2/sessions', keys.alice!, { session_id: sessionId, content: 'are you there?' })).status).toBe(200);
      await expect
        .poll(heard, { timeout: 500 })
        .toBe(true)
        .catch(() => {});
    }
    expect(heard()).toBe(true);

    redis.stop();
    expect((await rest(a, 'DELETE', `/v2/sessions/${sessionId}/users/${users.bob}`, keys.alice!)).status).toBe(200);
    expect((await rest(a, 'DELETE', '/apikeys', keys.carolSpare!, { apiKey: keys.carol })).status).toBe(200);

    redis = await startRedisServer(redisPort);
    trackChild(redis.child);
    await expect.poll(async () => (await healthy(a)) && (await healthy(b)), { timeout: 30_000 }).toBe(true);

    const secret = 'posted once Redis was back';
    expect((await rest(a, 'POST', '/v2/sessions', keys.alice!, { session_id: sessionId, content: secret })).status).toBe(200);
    const frames = await bobStream.done;
    expect(frames.some((f) => f.event === 'error' && f.data.data.code === 'ACCESS_REVOKED')).toBe(true);
    expect(JSON.stringify(updates(frames))).not.toContain(secret);
    await expect.poll(() => closedWith, { timeout: 20_000 }).not.toBeNull();
    expect(carolEnded).not.toBeNull();
    expect(JSON.stringify(carolEvents)).not.toContain(secret);
  });
});
