import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAI, type FakeOpenAI } from '../helpers/fake-openai.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { runCli, startServerProcess, type ServerProcess } from '../helpers/process.ts';
import { startRedis, type RedisServer } from '../helpers/redis.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import pg from 'pg';

/**
 * Two parley processes on PostgreSQL and Redis; Redis goes away, comes back emptied (as a
 * restarted Redis without persistence does), while one of them is writing a reply.
 */
const HEARTBEAT_MS = 200;
let redis: RedisServer;
let proxy: TcpProxy;
let db: Awaited<ReturnType<typeof freshPostgresDatabase>>;
let llm: FakeOpenAI;
let a: ServerProcess;
let b: ServerProcess;
let key: string;
let agentId: string;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  [redis, db, llm] = await Promise.all([startRedis(), freshPostgresDatabase(), startFakeOpenAI({ tokens: ['Hi', '!'] })]);
  proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(redis.url).port) });
  const env = {
    DATABASE_URL: db.url,
    REDIS_URL: proxy.through(redis.url),
    LLM_BASE_URL: llm.baseUrl,
    SHUTDOWN_GRACE_MS: '0',
    INSTANCE_HEARTBEAT_MS: String(HEARTBEAT_MS),
    LOG_LEVEL: 'warn',
  };
  const created = await runCli(['keys', 'create', 'alice', '--json'], env);
  key = JSON.parse(created.stdout).apiKey;
  [a, b] = await Promise.all([startServerProcess(env), startServerProcess(env)]);
  await Promise.all([a.waitFor(/parley listening on/), b.waitFor(/parley listening on/)]);
  const made = await fetch(`${a.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ query: 'mutation { createAgent(input: { name: "Echo", key: "echo-restart", public: false }) { rawId } }' }),
  });
  agentId = (await made.json()).data?.createAgent?.rawId ?? '';
  if (!agentId) throw new Error('no agent made');
});

afterAll(async () => {
  for (const s of [a, b]) s?.child.kill('SIGKILL');
  await llm?.close();
  await proxy?.close();
  await redis?.stop();
  await db?.drop().catch(() => {});
});

async function replyRow(sessionId: string) {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    const { rows } = await c.query(
      `SELECT "status", "content", "error" FROM "Message" WHERE "sessionId" = $1 AND "role" = 'assistant' ORDER BY "ordinal" DESC LIMIT 1`,
      [sessionId],
    );
    return rows[0] as { status: string; content: string; error: string | null };
  } finally {
    await c.end();
  }
}

describe('Redis restarted under two instances', () => {
  it('no instance takes the other for dead: the reply being written is saved complete, never failed; the outage is logged, throttled', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    llm.enqueue({ tokens: ['kept', ' all', ' the', ' way'], gate: (i) => (i === 2 ? held : undefined) });
    const res = await fetch(`${a.url}/v2/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ agent_ids: [agentId], content: 'hello', title: 'restart' }),
    });
    expect(res.status).toBe(200);
    const sessionId = (await res.json()).session_id as string;
    // a is writing (held after two tokens); the reply row says so.
    await expect.poll(async () => (await replyRow(sessionId))?.status, { timeout: 10_000 }).toBe('streaming');
    const before = { a: a.output().length, b: b.output().length };

    // Redis goes away for a while, and comes back with nothing in it.
    await proxy.cut();
    await pause(1_500);
    await redis.client().flushall();
    await proxy.restore();
    // Many sweeps of b (one per heartbeat), several grace periods long.
    await pause(HEARTBEAT_MS * 3 * 4);
    expect(await replyRow(sessionId)).toMatchObject({ status: 'streaming', error: null });

    release();
    await expect.poll(async () => (await replyRow(sessionId))?.status, { timeout: 10_000 }).toBe('complete');
    expect((await replyRow(sessionId)).content).toBe('kept all the way');

    // The next prompt is answered as usual.
    const next = await fetch(`${b.url}/v2/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ session_id: sessionId, content: 'still there?' }),
    });
    expect(next.status).toBe(200);
    await expect.poll(async () => (await replyRow(sessionId))?.status, { timeout: 10_000 }).toBe('complete');

    for (const [name, server] of [
      ['a', a],
      ['b', b],
    ] as const) {
      const during = server.output().slice(before[name]);
      expect(during).not.toMatch(/Unhandled error event/);
      expect(during).not.toMatch(/replies left unfinished by a stopped instance/);
      // Logged through the logger, at most once per connection per 10 s: a handful of lines, not 50-100.
      const warnings = during.split('\n').filter((l) => l.includes('Redis is unreachable; retrying'));
      expect(warnings.length).toBeGreaterThan(0);
      expect(warnings.length).toBeLessThanOrEqual(6);
    }
  });

  it('a peer that really stopped is still found dead, once the grace period has passed', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    llm.enqueue({ tokens: ['cut', ' short', ' here'], gate: (i) => (i === 2 ? held : undefined) });
    const res = await fetch(`${a.url}/v2/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ agent_ids: [agentId], content: 'hello again', title: 'dies' }),
    });
    const sessionId = (await res.json()).session_id as string;
    await expect.poll(async () => (await replyRow(sessionId))?.status, { timeout: 10_000 }).toBe('streaming');
    a.child.kill('SIGKILL');
    await a.exited;
    release();
    await expect.poll(async () => (await replyRow(sessionId))?.status, { timeout: 15_000 }).toBe('failed');
  });
});
