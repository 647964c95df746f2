import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { ConfigOverrides, TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { startServerProcess } from '../helpers/process.ts';
import { startRedis, type RedisServer } from '../helpers/redis.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, type SseClient } from '../helpers/sse.ts';

/**
 * Two instances of the service over one PostgreSQL database and one Redis, as behind a load
 * balancer: a key's requests and open streams count the same whichever instance they reach, and
 * a query persisted through one is known to the other.
 */
const WINDOW_MS = 4000;
const MAX_SUBSCRIPTIONS = 3;
let redis: RedisServer;
let database: Awaited<ReturnType<typeof freshPostgresDatabase>>;
let a: TestApp;
let b: TestApp;
let alice: TestUser;
const streams: SseClient[] = [];

setUp(async (start) => {
  [redis, database] = await Promise.all([start.service(startRedis()), start.service(freshPostgresDatabase(), (d) => d.drop())]);
  const config: ConfigOverrides = {
    redisUrl: redis.url,
    apq: { maxEntries: 2, ttlMs: 60_000 },
    limits: {
      rate: { windowMs: WINDOW_MS, perTier: { free: 6, staff: 0 }, default: 6, anonymous: 4 },
      maxSubscriptionsPerKey: MAX_SUBSCRIPTIONS,
      slotTtlMs: 1500,
    },
  };
  // One after the other: the first applies the migrations.
  a = await start.app(config, { kind: 'postgres', url: database.url });
  b = await start.app(config, { kind: 'postgres', url: database.url });
  // The subscription tests open many streams: their users' tier has no rate limit.
  alice = await a.createUser('alice');
  await a.db.user.update({ where: { id: alice.id }, data: { subscriptionTier: 'staff' } });
});
afterEach(() => {
  for (const s of streams.splice(0)) s.close();
});

const me = (t: TestApp, key: string | null) => t.rest('GET', '/v2/creators/me', { key });

async function sse(t: TestApp | { url: string }, path: string, key: string) {
  const stream = await openSse(`${t.url}${path}`, { headers: { 'x-api-key': key } });
  streams.push(stream);
  return stream;
}

describe('rate limits shared through Redis', () => {
  it('6 requests of one key across both instances are served, the 7th is 429 with Retry-After, and after the window both serve it again', async () => {
    const user = await a.createUser();
    const statuses = await Promise.all(Array.from({ length: 6 }, (_, i) => me(i % 2 ? a : b, user.apiKey)));
    expect(statuses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(statuses.map((r) => Number(r.headers.get('ratelimit-remaining'))).sort()).toEqual([0, 1, 2, 3, 4, 5]);

    const refused = await me(b, user.apiKey);
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatch(/^Rate limit exceeded: at most 6 requests/);
    const wait = Number(refused.headers.get('retry-after'));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(WINDOW_MS / 1000);
    expect((await me(a, user.apiKey)).status).toBe(429);

    await new Promise((r) => setTimeout(r, wait * 1000));
    await expect.poll(async () => (await me(a, user.apiKey)).status, { timeout: WINDOW_MS * 2, interval: 200 }).toBe(200);
    expect((await me(b, user.apiKey)).status).toBe(200);
  });

  it('requests without a key count per address across both instances', async () => {
    const statuses = [];
    for (const t of [a, b, a, b, a]) statuses.push((await t.rest('GET', '/v2/sessions/share/none')).status);
    expect(statuses).toEqual([404, 404, 404, 404, 429]);
    expect((await b.rest('GET', '/v2/tools')).status).toBe(429);
  });
});

describe('open subscriptions shared through Redis', () => {
  it(`a key holds at most ${MAX_SUBSCRIPTIONS} over both instances; closing one on either frees a slot on both`, async () => {
    const agent = await fixtures(a).agent(alice);
    const session = (await a.services.sessions.send({ id: alice.id }, { agentIds: [agent.id] })).sessionId;
    const path = `/v2/sessions/${session}/events`;
    const onA = await sse(a, path, alice.apiKey);
    await sse(a, path, alice.apiKey);
    await sse(b, path, alice.apiKey);
    expect(streams.map((s) => s.status)).toEqual([200, 200, 200]);
    for (const t of [a, b]) expect((await sse(t, path, alice.apiKey)).status).toBe(429);
    onA.close();
    await expect.poll(async () => (await sse(b, path, alice.apiKey)).status).toBe(200);
  });

  it('slots held by an instance that dies lapse after their TTL, so the key is not locked out', async () => {
    const bob = await a.createUser('bob');
    await a.db.user.update({ where: { id: bob.id }, data: { subscriptionTier: 'staff' } });
    const agent = await fixtures(a).agent(bob);
    const session = (await a.services.sessions.send({ id: bob.id }, { agentIds: [agent.id] })).sessionId;
    const path = `/v2/sessions/${session}/events`;
    const doomed = await startServerProcess({
      DATABASE_URL: database.url,
      REDIS_URL: redis.url,
      MAX_SUBSCRIPTIONS_PER_KEY: String(MAX_SUBSCRIPTIONS),
      LIMIT_SLOT_TTL_MS: '1000',
    });
    await doomed.waitFor(/parley listening on /);
    for (let i = 0; i < MAX_SUBSCRIPTIONS; i++) {
      const held = await sse(doomed, path, bob.apiKey);
      expect(held.status).toBe(200);
      // Its connection dies with the instance.
      held.done.catch(() => {});
    }
    expect((await sse(a, path, bob.apiKey)).status).toBe(429);
    // While it lives, it renews them: well past their TTL they still count.
    await new Promise((r) => setTimeout(r, 2500));
    expect((await sse(a, path, bob.apiKey)).status).toBe(429);

    doomed.child.kill('SIGKILL');
    await doomed.exited;
    // Nobody gave the slots back; they lapse within the TTL and the next open takes one.
    await expect.poll(async () => (await sse(a, path, bob.apiKey)).status, { timeout: 10_000, interval: 250 }).toBe(200);
    const pool = `parley:slots:{${(await a.services.apiKeys.authenticate(bob.apiKey)).keyId}}:subscriptions`;
    expect(await redis.client().zcard(pool)).toBe(1);
  });
});

describe('persisted queries shared through Redis', () => {
  const hashOf = (query: string) => createHash('sha256').update(query).digest('hex');
  async function post(t: TestApp, body: object) {
    const res = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': alice.apiKey },
      body: JSON.stringify(body),
    });
    return res.json();
  }
  const byHash = (t: TestApp, query: string) => post(t, { extensions: { persistedQuery: { version: 1, sha256Hash: hashOf(query) } } });
  const register = (t: TestApp, query: string) =>
    post(t, { query, extensions: { persistedQuery: { version: 1, sha256Hash: hashOf(query) } } });

  it('a query registered on one instance runs by its hash on the other; the store keeps the 2 most recently used', async () => {
    const [first, second, third] = ['{ me { rawId } }', '{ me { username } }', '{ me { type } }'];
    expect((await byHash(b, first!)).errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    await register(a, first!);
    expect((await byHash(b, first!)).data.me.rawId).toBe(alice.id);

    await register(b, second!);
    expect((await byHash(a, first!)).data).toBeTruthy();
    await register(a, third!);
    expect((await byHash(b, second!)).errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    expect((await byHash(b, first!)).data).toBeTruthy();
    expect((await byHash(a, third!)).data).toBeTruthy();
    expect(await redis.client().zcard('parley:{apq}:index')).toBe(2);
  });
});
