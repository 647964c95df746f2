import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse } from '../helpers/sse.ts';

/** What a browser on another site, and one on an allowed site, gets from REST and GraphQL. */
let open: TestApp;
let listed: TestApp;
let alice: TestUser;
const APP = 'https://app.example.com';
const ADMIN = 'https://admin.example.com';

setUp(async (start) => {
  [open, listed] = await Promise.all([start.app(), start.app({ http: { corsOrigins: [APP, ADMIN] } })]);
  alice = await open.createUser('alice');
});

const preflight = (t: TestApp, path: string, origin: string, method = 'POST') =>
  fetch(`${t.url}${path}`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'content-type, x-api-key' },
  });

describe('CORS: one policy for REST and GraphQL, never with credentials', () => {
  it.each(['/graphql', '/v2/creators/me', `/v2/agents/some-id`, '/v2/sessions', '/apikeys'])(
    'a preflight to %s is answered for any origin by default',
    async (path) => {
      for (const origin of ['https://elsewhere.example', 'null']) {
        const res = await preflight(open, path, origin, path.startsWith('/v2/agents') ? 'PATCH' : 'POST');
        expect(res.status).toBe(204);
        expect(res.headers.get('access-control-allow-origin')).toBe('*');
        expect(res.headers.get('access-control-allow-methods')).toMatch(/PATCH/);
        expect(res.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('x-api-key');
        expect(res.headers.get('access-control-allow-credentials')).toBeNull();
      }
    },
  );

  it('a listed origin is allowed; any other gets no CORS headers, on REST and GraphQL alike', async () => {
    for (const path of ['/graphql', '/v2/creators/me']) {
      const allowed = await preflight(listed, path, APP);
      expect(allowed.headers.get('access-control-allow-origin')).toBe(APP);
      expect(allowed.headers.get('vary')).toMatch(/Origin/);
      const other = await preflight(listed, path, 'https://evil.example');
      expect(other.headers.get('access-control-allow-origin')).toBeNull();
      const nullOrigin = await preflight(listed, path, 'null');
      expect(nullOrigin.headers.get('access-control-allow-origin')).toBeNull();
      for (const res of [allowed, other, nullOrigin]) expect(res.headers.get('access-control-allow-credentials')).toBeNull();
    }
  });

  it('with a list, actual responses name each listed origin (errors included) and carry nothing for others', async () => {
    const bob = await listed.createUser('bob');
    for (const origin of [APP, ADMIN]) {
      const res = await fetch(`${listed.url}/v2/creators/me`, { headers: { origin, 'x-api-key': bob.apiKey } });
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBe(origin);
      expect(res.headers.get('vary')).toMatch(/Origin/);
      // A script on a listed page can read why it was refused.
      const refused = await fetch(`${listed.url}/v2/creators/me`, { headers: { origin } });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('access-control-allow-origin')).toBe(origin);
    }
    for (const origin of ['https://evil.example', 'https://app.example.com.evil.example', 'http://app.example.com', 'null']) {
      const res = await fetch(`${listed.url}/v2/creators/me`, { headers: { origin, 'x-api-key': bob.apiKey } });
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
      const gql = await fetch(`${listed.url}/graphql`, {
        method: 'POST',
        headers: { origin, 'content-type': 'application/json', 'x-api-key': bob.apiKey },
        body: '{"query":"{ me { id } }"}',
      });
      expect(gql.headers.get('access-control-allow-origin')).toBeNull();
    }
  });

  it('a preflight grants the methods the API uses and no others; scripts may read Allow, Retry-After and RateLimit-*', async () => {
    const res = await preflight(open, '/v2/agents/some-id', 'https://elsewhere.example', 'PUT');
    const methods = res.headers.get('access-control-allow-methods')!.split(/,\s*/);
    expect(methods.sort()).toEqual(['DELETE', 'GET', 'HEAD', 'PATCH', 'POST']);
    const me = await fetch(`${open.url}/v2/creators/me`, { headers: { origin: 'https://elsewhere.example', 'x-api-key': alice.apiKey } });
    expect(me.headers.get('access-control-expose-headers')?.split(/,\s*/)).toEqual([
      'Allow',
      'Retry-After',
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
    ]);
  });

  it('actual responses carry the policy, SSE streams included', async () => {
    const origin = 'https://elsewhere.example';
    const me = await fetch(`${open.url}/v2/creators/me`, { headers: { origin, 'x-api-key': alice.apiKey } });
    expect(me.headers.get('access-control-allow-origin')).toBe('*');
    const gql = await fetch(`${open.url}/graphql`, {
      method: 'POST',
      headers: { origin, 'content-type': 'application/json', 'x-api-key': alice.apiKey },
      body: '{"query":"{ me { id } }"}',
    });
    expect(gql.headers.get('access-control-allow-origin')).toBe('*');
    expect(gql.headers.get('access-control-allow-credentials')).toBeNull();

    const agent = await fixtures(open).agent(alice);
    const sessionId = (await open.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [agent.id], title: 'Headers' } }))
      .body.session_id;
    const stream = await openSse(`${open.url}/v2/sessions/${sessionId}/events`, { headers: { origin, 'x-api-key': alice.apiKey } });
    try {
      expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(stream.headers.get('access-control-allow-origin')).toBe('*');
      expect(stream.headers.get('x-content-type-options')).toBe('nosniff');
    } finally {
      stream.close();
    }
  });
});

describe('security headers', () => {
  it.each([
    ['GET', '/healthz'],
    ['GET', '/v2/creators/me'],
    ['GET', '/v2/nope'],
    ['POST', '/graphql'],
  ])('%s %s carries nosniff, a deny-all CSP for data and the usual set', async (method, path) => {
    const res = await fetch(`${open.url}${path}`, {
      method,
      headers: { 'x-api-key': alice.apiKey, 'content-type': 'application/json' },
      body: method === 'POST' ? '{"query":"{ me { id } }"}' : undefined,
    });
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('x-frame-options')).toBe('SAMEORIGIN');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('strict-transport-security')).toMatch(/max-age=\d+/);
    expect(res.headers.get('x-powered-by')).toBeNull();
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toMatch(/default-src 'none'/);
    expect(csp).toMatch(/frame-ancestors 'none'/);
    expect(csp).not.toMatch(/upgrade-insecure-requests/);
  });

  it("the GraphiQL page's CSP allows its own scripts, styles and workers, and nothing from elsewhere", async () => {
    const res = await fetch(`${open.url}/graphql`, { headers: { accept: 'text/html' } });
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toMatch(/script-src 'self'(;|$)/);
    expect(csp).toMatch(/connect-src 'self'(;|$)/);
    expect(csp).toMatch(/worker-src 'self'(;|$)/);
    expect(csp).not.toMatch(/unsafe-eval|https:|\*/);
  });
});
