import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { expectNoInternals, rawRequest } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';

describe('REST transport', () => {
  let t: TestApp;
  let alice: TestUser;
  let agentId: string;

  setUp(async (start) => {
    t = await start.app();
    alice = await t.createUser('alice');
    agentId = (await fixtures(t).agent(alice, { name: 'Original' })).id;
  });

  const agentRow = () => t.db.agent.findUniqueOrThrow({ where: { id: agentId }, include: { user: true } });

  /** A JSON error body with exactly `error` and `message`, both non-empty strings. */
  function expectTransportError(res: { status: number; text: string; headers: Headers }, status: number) {
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type') ?? '').toMatch(/^application\/json/);
    const body = JSON.parse(res.text);
    expect(Object.keys(body).sort()).toEqual(['error', 'message']);
    expect(typeof body.error).toBe('string');
    expect(typeof body.message).toBe('string');
    expect(body.message.length).toBeGreaterThan(0);
    expectNoInternals(res.text);
    return body;
  }

  it('GET /healthz answers 200 {status:"ok"} without a key (and with a bad one)', async () => {
    for (const key of [null, 'garbage']) {
      const res = await t.rest('GET', '/healthz', { key });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        status: 'ok',
        database: 'ok',
        events: process.env.TEST_REDIS_URL ? expect.stringMatching(/^Redis at /) : expect.stringMatching(/^in process/),
        replies: expect.stringMatching(/offline responder/),
        search: { embeddings: expect.stringMatching(/^hashed-ngrams-v1: .*not CLIP/), storage: expect.any(String) },
      });
    }
  });

  it.each([
    ['GET', '/nope', true],
    ['GET', '/v2/nope', false],
    ['GET', '/v3/agents/x', true],
    ['PATCH', '/v2/agents/some-id/extra', true],
  ])('answers 404 JSON {error, message} for the unknown route %s %s', async (method, path, withKey) => {
    const res = await rawRequest(t, method, path, { key: withKey ? alice.apiKey : null });
    const body = expectTransportError(res, 404);
    expect(body.message).toContain(path);
  });

  it.each([
    ['POST', '/v2/agents/some-id', 'GET, HEAD, PATCH, DELETE', true],
    ['PUT', '/v2/agents/some-id', 'GET, HEAD, PATCH, DELETE', false],
    ['PUT', '/v2/concepts/some-id', 'GET, HEAD, PATCH', true],
    ['GET', '/apikeys', 'DELETE', true],
    ['DELETE', '/graphql', 'GET, HEAD, POST, OPTIONS', false],
  ])('answers 405 JSON with Allow for %s %s, a path that takes other methods', async (method, path, allow, withKey) => {
    const res = await rawRequest(t, method, path, { key: withKey ? alice.apiKey : null });
    const body = expectTransportError(res, 405);
    expect(res.headers.get('allow')).toBe(allow);
    expect(body.message).toBe(`${method} is not allowed on ${path}; it takes ${allow}`);
  });

  it('answers 400 JSON for malformed JSON and changes nothing', async () => {
    const before = await agentRow();
    for (const [method, path] of [
      ['PATCH', `/v2/agents/${agentId}`],
      ['DELETE', '/apikeys'],
      ['PATCH', '/v2/concepts/whatever'],
    ] as const) {
      const res = await rawRequest(t, method, path, {
        key: alice.apiKey,
        body: '{"name": "Changed",',
        headers: { 'content-type': 'application/json' },
      });
      expectTransportError(res, 400);
    }
    expect(await agentRow()).toEqual(before);
    expect((await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).status).toBe(200);
  });

  it('accepts application/json with a charset parameter', async () => {
    const res = await rawRequest(t, 'PATCH', `/v2/agents/${agentId}`, {
      key: alice.apiKey,
      body: '{"greeting":"charset ok"}',
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    expect(res.status).toBe(200);
    expect((await agentRow()).greeting).toBe('charset ok');
  });

  it('answers 413 JSON for a body over 1 MiB and changes nothing', async () => {
    const before = await agentRow();
    const big = JSON.stringify({ name: 'Huge', knowledge: 'k'.repeat(1024 * 1024) });
    expect(big.length).toBeGreaterThan(1024 * 1024);
    const res = await rawRequest(t, 'PATCH', `/v2/agents/${agentId}`, {
      key: alice.apiKey,
      body: big,
      headers: { 'content-type': 'application/json' },
    });
    expectTransportError(res, 413);
    expect(await agentRow()).toEqual(before);
    // Just under the limit is parsed normally (and then refused by validation, as knowledge is capped at 100000).
    const underLimit = JSON.stringify({ name: 'Huge', knowledge: 'k'.repeat(1024 * 1024 - 100) });
    const ok = await rawRequest(t, 'PATCH', `/v2/agents/${agentId}`, {
      key: alice.apiKey,
      body: underLimit,
      headers: { 'content-type': 'application/json' },
    });
    expect(ok.status).toBe(400);
    expect(JSON.parse(ok.text).error).toMatch(/^knowledge: /);
    expect(await agentRow()).toEqual(before);
  });

  it.each([
    ['application/x-www-form-urlencoded', 'name=Changed'],
    ['application/xml', '<agent><name>Changed</name></agent>'],
    ['multipart/form-data; boundary=x', '--x\r\nContent-Disposition: form-data; name="name"\r\n\r\nChanged\r\n--x--'],
    ['application/octet-stream', '{"name":"Changed"}'],
  ])('answers 415 JSON for content type %s and changes nothing', async (type, body) => {
    const before = await agentRow();
    const res = await rawRequest(t, 'PATCH', `/v2/agents/${agentId}`, { key: alice.apiKey, body, headers: { 'content-type': type } });
    expectTransportError(res, 415);
    expect(await agentRow()).toEqual(before);
  });

  it('answers 415 JSON for a JSON body sent as text/plain (the default of fetch without a content type), changing nothing', async () => {
    const before = await agentRow();
    const patch = await rawRequest(t, 'PATCH', `/v2/agents/${agentId}`, {
      key: alice.apiKey,
      body: '{"name":"Changed"}',
      headers: { 'content-type': 'text/plain;charset=UTF-8' },
    });
    expectTransportError(patch, 415);
    const del = await rawRequest(t, 'DELETE', '/apikeys', {
      key: alice.apiKey,
      body: JSON.stringify({ apiKey: alice.apiKey }),
      headers: { 'content-type': 'text/plain' },
    });
    expectTransportError(del, 415);
    expect(await agentRow()).toEqual(before);
    expect((await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).status).toBe(200);
  });

  it('answers a JSON {error, message} body, without framework codes, for a malformed URL escape', async () => {
    const res = await rawRequest(t, 'GET', '/v2/agents/%E0%A4%A', { key: alice.apiKey });
    expectTransportError(res, 400);
  });

  it('answers a JSON {error, message} body, without framework codes, for an over-long path parameter', async () => {
    const res = await rawRequest(t, 'GET', `/v2/agents/${'x'.repeat(5000)}`, { key: alice.apiKey });
    expect([404, 414]).toContain(res.status);
    expectTransportError(res, res.status);
  });

  it('never shows a stack trace, source path or internal error name in any response', async () => {
    const requests: [string, string, { key?: string | null; body?: string; headers?: Record<string, string> }][] = [
      ['GET', '/nope', {}],
      ['GET', '/v2/agents/x', {}],
      ['GET', '/v2/agents/x', { key: 'pk_bad' }],
      ['GET', '/v2/agents/nope', { key: alice.apiKey }],
      ['GET', '/v2/agents/a%00b', { key: alice.apiKey }],
      ['GET', '/v2/concepts/a%00b', { key: alice.apiKey }],
      ['GET', '/v2/models/a%00b', { key: alice.apiKey }],
      ['POST', '/v2/creations/a%00b/like', { key: alice.apiKey }],
      [
        'PATCH',
        `/v2/agents/${agentId}`,
        { key: alice.apiKey, body: '{"name":"a\\u0000b"}', headers: { 'content-type': 'application/json' } },
      ],
      ['PATCH', `/v2/agents/${agentId}`, { key: alice.apiKey, body: '{"name":', headers: { 'content-type': 'application/json' } }],
      [
        'PATCH',
        `/v2/agents/${agentId}`,
        { key: alice.apiKey, body: '{"llm_settings":{"model_profile":"ultra"}}', headers: { 'content-type': 'application/json' } },
      ],
      [
        'PATCH',
        `/v2/agents/${agentId}`,
        { key: alice.apiKey, body: '{"__proto__":{"name":"x"}}', headers: { 'content-type': 'application/json' } },
      ],
      ['PATCH', `/v2/agents/${agentId}`, { key: alice.apiKey, body: 'name=x', headers: { 'content-type': 'application/xml' } }],
      ['PATCH', `/v2/concepts/nope`, { key: alice.apiKey, body: '{"images":[]}', headers: { 'content-type': 'application/json' } }],
      ['DELETE', '/apikeys', { key: alice.apiKey, body: '{"apiKey":"pk_x"}', headers: { 'content-type': 'application/json' } }],
      ['DELETE', '/apikeys', { key: alice.apiKey, body: '[1,2', headers: { 'content-type': 'application/json' } }],
    ];
    for (const [method, path, options] of requests) {
      const res = await rawRequest(t, method, path, options);
      expect(res.status, `${method} ${path}`).toBeGreaterThanOrEqual(400);
      expect(res.headers.get('content-type') ?? '', `${method} ${path}`).toMatch(/^application\/json/);
      expect(() => JSON.parse(res.text), `${method} ${path}`).not.toThrow();
      expectNoInternals(res.text);
    }
    // The key and agent survived all of that.
    expect((await t.rest('GET', `/v2/agents/${agentId}`, { key: alice.apiKey })).body.agent.name).toBe('Original');
  });
});
