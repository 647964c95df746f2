import { parse } from 'graphql';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsExecute } from '../helpers/graphql-ws.ts';
import { unknownWellFormedKey } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * Rate limits counted in this process, over real HTTP and graphql-ws: per key by tier, per
 * address without a key. Each test uses keys of its own, so their windows do not meet.
 */
const WINDOW_MS = 4000;
let t: TestApp;
const ws = graphqlWsClients(() => t.url);

setUp(async (start) => {
  t = await start.app({ limits: { rate: { windowMs: WINDOW_MS, perTier: { free: 5, pro: 8 }, default: 4, anonymous: 3 } } });
});
afterEach(() => ws.disposeAll());

const me = (key: string | null) => t.rest('GET', '/v2/creators/me', { key });
const gqlPost = (key: string | null, query = '{ me { username } }') =>
  fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { 'x-api-key': key } : {}) },
    body: JSON.stringify({ query }),
  });

/** Sends `n` requests at once and returns their statuses, sorted. */
async function burst(n: number, send: () => Promise<{ status: number }>) {
  return (await Promise.all(Array.from({ length: n }, send))).map((r) => r.status).sort();
}

function expectRetryAfter(headers: Headers) {
  const seconds = Number(headers.get('retry-after'));
  expect(Number.isInteger(seconds)).toBe(true);
  expect(seconds).toBeGreaterThanOrEqual(1);
  expect(seconds).toBeLessThanOrEqual(WINDOW_MS / 1000);
  return seconds;
}

describe('rate limits per key, by subscription tier', () => {
  it('a free key has 5 requests per window; the 6th is 429 with Retry-After in the resource’s error shape, and nothing changes', async () => {
    const alice = await t.createUser();
    const agent = await fixtures(t).agent(alice, { name: 'Before' });
    const first = await me(alice.apiKey);
    expect(first.status).toBe(200);
    expect(first.headers.get('ratelimit-limit')).toBe('5');
    expect(first.headers.get('ratelimit-remaining')).toBe('4');
    expect(await burst(4, () => me(alice.apiKey))).toEqual([200, 200, 200, 200]);

    const profile = await me(alice.apiKey);
    expect(profile.status).toBe(429);
    expectRetryAfter(profile.headers);
    expect(profile.headers.get('ratelimit-remaining')).toBe('0');
    expect(Object.keys(profile.body)).toEqual(['error']);
    expect(profile.body.error).toMatch(/^Rate limit exceeded: at most 5 requests per 4 s for this API key; retry in \d+ s$/);

    // Each resource answers in its documented shape.
    const session = await t.rest('GET', '/v2/sessions/some-id', { key: alice.apiKey });
    expect({ status: session.status, keys: Object.keys(session.body) }).toEqual({ status: 429, keys: ['message'] });
    const deleted = await t.rest('DELETE', '/v2/sessions/some-id', { key: alice.apiKey });
    expect({ status: deleted.status, keys: Object.keys(deleted.body) }).toEqual({ status: 429, keys: ['error', 'message'] });
    const patched = await t.rest('PATCH', `/v2/agents/${agent.id}`, { key: alice.apiKey, body: { name: 'After' } });
    expect({ status: patched.status, keys: Object.keys(patched.body) }).toEqual({ status: 429, keys: ['error'] });
    expect(patched.headers.get('connection')).toBe('close');
    expect((await t.db.agent.findUniqueOrThrow({ where: { id: agent.id } })).name).toBe('Before');
  });

  it('GraphQL over HTTP is refused with 429, Retry-After and a RATE_LIMITED error carrying retryAfter', async () => {
    const bob = await t.createUser();
    expect(await burst(5, () => gqlPost(bob.apiKey))).toEqual([200, 200, 200, 200, 200]);
    const refused = await gqlPost(bob.apiKey);
    expect(refused.status).toBe(429);
    const seconds = expectRetryAfter(refused.headers);
    expect(await refused.json()).toEqual({
      errors: [{ message: expect.stringMatching(/^Rate limit exceeded/), extensions: { code: 'RATE_LIMITED', retryAfter: seconds } }],
    });
    // REST and GraphQL draw on one count.
    expect((await me(bob.apiKey)).status).toBe(429);
  });

  it('a pro key has 8; keys count apart; a tier without a limit of its own gets the default', async () => {
    const pro = await t.createUser();
    await t.db.user.update({ where: { id: pro.id }, data: { subscriptionTier: 'pro' } });
    const other = await t.createUser();
    expect(await burst(9, () => me(pro.apiKey))).toEqual([...Array(8).fill(200), 429]);
    expect((await me(other.apiKey)).status).toBe(200);

    const patron = await t.createUser();
    await t.db.user.update({ where: { id: patron.id }, data: { subscriptionTier: 'Patron' } });
    expect(await burst(5, () => me(patron.apiKey))).toEqual([200, 200, 200, 200, 429]);
  });

  it('requests work again once the window has passed', async () => {
    const carol = await t.createUser();
    expect(await burst(6, () => me(carol.apiKey))).toEqual([200, 200, 200, 200, 200, 429]);
    const refused = await me(carol.apiKey);
    expect(refused.status).toBe(429);
    const wait = expectRetryAfter(refused.headers);
    await new Promise((r) => setTimeout(r, wait * 1000));
    await expect.poll(async () => (await me(carol.apiKey)).status, { timeout: WINDOW_MS * 2, interval: 200 }).toBe(200);
  });

  it('each graphql-ws operation counts against the same limit; the one over it gets RATE_LIMITED and the socket stays open', async () => {
    const dave = await t.createUser();
    const client = ws.connect(dave.apiKey);
    const query = parse('{ me { username } }');
    for (let i = 0; i < 5; i++) expect((await wsExecute(client, query)).data).toEqual({ me: { username: dave.username } });
    await expect(wsExecute(client, query)).rejects.toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/^Rate limit exceeded/),
        extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number) },
      }),
    ]);
    expect((await me(dave.apiKey)).status).toBe(429);
  });
});

describe('rate limits without a key, per address', () => {
  it('public routes, requests without a key and requests with a bad key count together; /healthz never does', async () => {
    const statuses = [
      (await t.rest('GET', '/v2/sessions/share/nothing-here')).status,
      (await t.rest('GET', '/v2/tools')).status,
      (await t.rest('GET', '/v2/tools', { key: unknownWellFormedKey() })).status,
    ];
    expect(statuses).toEqual([404, 401, 401]);
    const share = await t.rest('GET', '/v2/sessions/share/nothing-here');
    expect({ status: share.status, keys: Object.keys(share.body) }).toEqual({ status: 429, keys: ['error'] });
    expect(share.body.error).toMatch(/for this address without an API key/);
    expectRetryAfter(share.headers);
    expect((await t.rest('GET', '/v2/tools')).status).toBe(429);
    const anonymousGraphQL = await gqlPost(null, '{ __typename }');
    expect(anonymousGraphQL.status).toBe(429);
    expect((await anonymousGraphQL.json()).errors[0].extensions.code).toBe('RATE_LIMITED');

    // A caller with a key is counted by its key, not by the address it shares.
    const erin = await t.createUser();
    expect((await me(erin.apiKey)).status).toBe(200);
    for (let i = 0; i < 10; i++) expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
  });

  it('a refusal carries the CORS policy, and scripts may read Retry-After and RateLimit-*', async () => {
    const frank = await t.createUser();
    await burst(5, () => me(frank.apiKey));
    const refused = await fetch(`${t.url}/v2/creators/me`, { headers: { origin: 'https://app.example.com', 'x-api-key': frank.apiKey } });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('access-control-allow-origin')).toBe('*');
    const exposed = refused.headers.get('access-control-expose-headers')?.toLowerCase().split(/,\s*/) ?? [];
    expect(exposed).toEqual(expect.arrayContaining(['retry-after', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']));
  });
});

describe('client addresses behind a proxy (TRUST_PROXY)', () => {
  it('X-Forwarded-For names the client only when the proxy is trusted; IPv6 clients are counted by their /64', async () => {
    const [direct, proxied] = await Promise.all([
      startTestApp({ limits: { rate: { windowMs: 60_000, anonymous: 2 } } }),
      startTestApp({ http: { trustProxy: true }, limits: { rate: { windowMs: 60_000, anonymous: 2 } } }),
    ]);
    try {
      const from = (app: TestApp, address: string) =>
        app.rest('GET', '/v2/sessions/share/none', { headers: { 'x-forwarded-for': address } }).then((r) => r.status);
      // Not trusted: every request is the loopback client's, whatever it claims.
      expect([await from(direct, '192.0.2.1'), await from(direct, '192.0.2.2'), await from(direct, '192.0.2.3')]).toEqual([404, 404, 429]);

      expect([await from(proxied, '192.0.2.1'), await from(proxied, '192.0.2.1'), await from(proxied, '192.0.2.1')]).toEqual([
        404, 404, 429,
      ]);
      expect(await from(proxied, '192.0.2.2')).toBe(404);
      expect([
        await from(proxied, '2001:db8:1:2::1'),
        await from(proxied, '2001:db8:1:2:ffff::9'),
        await from(proxied, '2001:0db8:0001:0002::7'),
      ]).toEqual([404, 404, 429]);
      expect(await from(proxied, '2001:db8:1:3::1')).toBe(404);
    } finally {
      await Promise.all([direct.close(), proxied.close()]);
    }
  });
});
