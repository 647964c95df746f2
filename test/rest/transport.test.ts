import { describe, expect, it, beforeAll } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { expectNoInternals, rawRequest, expectError } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';
import { settledSession, titledSession } from '../helpers/sessions.ts';
import { unsafeUrls } from '../helpers/unsafe-urls.ts';
import { openSse } from '../helpers/sse.ts';

/**
 * The HTTP surface REST clients and browsers meet: the transport's answers to malformed requests,
 * hostile input over REST, the statements a list costs, and CORS and security headers. One app for
 * all (each start makes and migrates a database); each describe has users of its own. The CORS
 * policy with a list of origins needs an app of its own, started in its describe.
 */
let app: TestApp;

setUp(async (start) => {
  app = await start.app();
});

describe('transport', () => {
  describe('REST transport', () => {
    let t: TestApp;
    let alice: TestUser;
    let agentId: string;

    beforeAll(async () => {
      t = app;
      alice = await t.createUser('alice-transport');
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
});

describe('hostile-input', () => {
  /** What an attacker with a key of their own sends over REST, and what comes back. */

  let t: TestApp;
  let alice: TestUser;
  let bob: TestUser;

  beforeAll(async () => {
    t = app;
    alice = await t.createUser('alice');
    bob = await t.createUser('bob');
  });

  describe('URLs a user gives are http or https only', () => {
    it.each(unsafeUrls)('an agent image %j is refused with 400 and nothing changes', async (url) => {
      const agent = await fixtures(t).agent(bob, { image: 'https://cdn.example.com/bob.png' });
      const res = await t.rest('PATCH', `/v2/agents/${agent.id}`, { key: bob.apiKey, body: { image: url, public: true } });
      expectError(res, 400, 'error', 'image: must be an http or https URL');
      const row = await t.db.agent.findUniqueOrThrow({ where: { id: agent.id }, include: { user: true } });
      expect([row.image, row.user.userImage]).toEqual(['https://cdn.example.com/bob.png', 'https://cdn.example.com/bob.png']);
    });

    it.each(unsafeUrls)('a concept image %j is refused with 400 naming images[i].image', async (url) => {
      const concept = await fixtures(t).concept(bob);
      const res = await t.rest('PATCH', `/v2/concepts/${concept.id}`, {
        key: bob.apiKey,
        body: { images: [{ image: 'https://example.com/ok.png' }, { image: url, usage_instructions: 'side' }] },
      });
      expectError(res, 400, 'message', 'images[1].image: must be an http or https URL');
      expect((await t.db.conceptImage.findMany({ where: { conceptId: concept.id } })).map((i) => i.image)).toEqual([
        'https://example.com/a.jpg',
      ]);
    });

    it.each(unsafeUrls)('a message attachment %j is refused with 400 naming attachments[i]', async (url) => {
      const agent = await fixtures(t).agent(bob);
      const res = await t.rest('POST', '/v2/sessions', {
        key: bob.apiKey,
        body: { agent_ids: [agent.id], content: 'look', attachments: [url] },
      });
      expectError(res, 400, 'message', 'attachments[0]: must be an http or https URL');
    });

    it('http and https URLs are accepted', async () => {
      const agent = await fixtures(t).agent(bob);
      for (const image of ['http://cdn.example.com/a.png', 'https://cdn.example.com/b.png?size=2']) {
        expect((await t.rest('PATCH', `/v2/agents/${agent.id}`, { key: bob.apiKey, body: { image } })).status).toBe(200);
      }
    });
  });

  describe('agent keys are unique after case folding and Unicode normalization', () => {
    it.each([
      ['ALICE', "another user's name in capitals"],
      ['Alice', "another user's name capitalised"],
    ])('renaming an agent to %s (%s) is a 409 with the conflict error', async (key) => {
      const agent = await fixtures(t).agent(bob);
      const res = await t.rest('PATCH', `/v2/agents/${agent.id}`, { key: bob.apiKey, body: { key, name: 'Alice', public: true } });
      expectError(res, 409, 'error', 'An agent with this key already exists');
      expect((await t.db.user.findUniqueOrThrow({ where: { id: agent.id } })).username).not.toBe(key);
    });

    it("an agent key differing from another agent's only in case is a 409", async () => {
      await fixtures(t).agent(alice, { key: 'muse' });
      const squatter = await fixtures(t).agent(bob);
      const res = await t.rest('PATCH', `/v2/agents/${squatter.id}`, { key: bob.apiKey, body: { key: 'MUSE' } });
      expectError(res, 409, 'error', 'An agent with this key already exists');
    });

    it('the database refuses the clash too, whatever path the write takes', async () => {
      await expect(t.db.user.create({ data: { username: 'BOB' } })).rejects.toMatchObject({ code: 'P2002' });
      await expect(t.db.user.create({ data: { username: 'ｂｏｂ' } })).rejects.toMatchObject({ code: 'P2002' });
    });
  });

  describe('names are looked up as own keys only, never through the prototype chain', () => {
    it.each(['constructor', 'toString', 'hasOwnProperty'])('tools.%s is an unknown tool, named as sent', async (name) => {
      const agent = await fixtures(t).agent(bob);
      const res = await t.rest('PATCH', `/v2/agents/${agent.id}`, { key: bob.apiKey, body: { tools: { [name]: true } } });
      expectError(res, 400, 'error', `tools.${name}: unknown tool "${name}" (see the tools list)`);
    });

    it('a body with a __proto__ key is refused, not silently dropped', async () => {
      const agent = await fixtures(t).agent(bob, { tools: { flux_dev: true } });
      for (const body of [
        '{"tools":{"__proto__":{"flux_dev":false}}}',
        '{"__proto__":{"name":"x"}}',
        '{"llm_settings":{"constructor":{"prototype":{}}}}',
      ]) {
        const res = await rawRequest(t, 'PATCH', `/v2/agents/${agent.id}`, {
          key: bob.apiKey,
          body,
          headers: { 'content-type': 'application/json' },
        });
        expect(res.status, body).toBe(400);
        expect(JSON.parse(res.text).message).toMatch(/^Malformed JSON in request body: .*(prototype|constructor)/);
      }
      expect((await t.db.agent.findUniqueOrThrow({ where: { id: agent.id } })).tools).toEqual({ flux_dev: true });
    });

    it('query parameters named like prototype members are ordinary unknown parameters', async () => {
      const res = await t.rest('GET', '/v2/sessions?constructor=1&limit=2', { key: bob.apiKey });
      expect(res.status).toBe(200);
    });

    it('a reaction named like a prototype member is refused like any name outside the set, and changes nothing', async () => {
      const agent = await fixtures(t).agent(bob);
      const sessionId = (await t.rest('POST', '/v2/sessions', { key: bob.apiKey, body: { agent_ids: [agent.id], content: 'hi' } })).body
        .session_id;
      const reply = (await settledSession(t, bob, sessionId)).messages.at(-1);
      for (const reaction of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
        const res = await t.rest('POST', '/v2/sessions/react', { key: bob.apiKey, body: { message_id: reply.id, reaction } });
        expect(res.status, reaction).toBe(400);
        expect(res.body.message, reaction).toMatch(/^reaction: must be one of /);
      }
      expect((await settledSession(t, bob, sessionId)).messages.at(-1).reactions).toEqual({});
    });
  });
});

describe('list-statements', () => {
  /**
   * The REST lists the SDK's v2 methods read cost a fixed number of SQL statements however many
   * rows a page holds: relations (owners, agents, creators) are read with the rows, never one row at
   * a time.
   */
  describe('new REST lists: no statement per row', () => {
    let t: TestApp;
    let f: ReturnType<typeof fixtures>;
    let alice: TestUser;

    beforeAll(async () => {
      t = app;
      f = fixtures(t);
      alice = await t.createUser('alice-lists');
    });

    /** The statements one GET costs (the fewest of three: `countQueries`), and its body. */
    async function statementsFor(path: string) {
      let body: any;
      const count = await t.countQueries(async () => {
        const res = await t.rest('GET', path, { key: alice.apiKey });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        body = res.body;
      });
      return { count, body };
    }

    it('GET /v2/collections/light: 30 collections of 3 creations cost what 3 do', async () => {
      const fill = async (n: number) => {
        for (let i = 0; i < n; i++) {
          const creations = [await f.creation(alice), await f.creation(alice, { public: false }), await f.creation(alice)];
          await t.services.collections.create({ id: alice.id }, { name: `C${i}`, creationIds: creations.map((c) => c.id) });
        }
      };
      await fill(3);
      const small = await statementsFor('/v2/collections/light');
      expect(small.body.collections).toHaveLength(3);
      await fill(27);
      const large = await statementsFor('/v2/collections/light');
      expect(large.body.collections).toHaveLength(30);
      expect(large.body.collections.every((c: { creations: string[] }) => c.creations.length === 3)).toBe(true);
      expect(large.count).toBe(small.count);
    });

    it('GET /v2/collections/{id}/creations: 60 creations (by agents, populated) cost what 4 do', async () => {
      const agent = await f.agent(alice);
      const made = await t.services.collections.create({ id: alice.id }, { name: 'Growing' });
      const add = async (n: number) => {
        for (let i = 0; i < n; i++) {
          const c = await f.creation(alice, { agentId: agent.id });
          await t.services.collections.add({ id: alice.id }, made.id, { creationIds: [c.id] });
        }
      };
      await add(4);
      const small = await statementsFor(`/v2/collections/${made.id}/creations?limit=100`);
      expect(small.body.docs).toHaveLength(4);
      await add(56);
      const large = await statementsFor(`/v2/collections/${made.id}/creations?limit=100`);
      expect(large.body.docs).toHaveLength(60);
      expect(large.body.docs.every((d: { user: { username: string } }) => d.user.username === alice.username)).toBe(true);
      expect(large.count).toBe(small.count);
      // The collection itself carries its first page, cover and count: the same few statements.
      const one = await statementsFor(`/v2/collections/${made.id}`);
      expect(one.body.collection.creations).toHaveLength(20);
      expect(one.count).toBeLessThanOrEqual(large.count + 1);
    });

    it('GET /v2/models: 50 models with their owners cost what 5 do', async () => {
      const bob = await t.createUser('bob-lists');
      for (let i = 0; i < 5; i++) await f.model(i % 2 ? bob : alice, { public: true });
      const small = await statementsFor('/v2/models?limit=100');
      const before = small.body.docs.length;
      for (let i = 0; i < 45; i++) await f.model(i % 2 ? bob : alice, { public: true });
      const large = await statementsFor('/v2/models?limit=100');
      expect(large.body.docs).toHaveLength(before + 45);
      expect(large.count).toBe(small.count);
    });

    it('GET /v2/threads: 12 threads with their owners and agents cost what 2 do', async () => {
      const agent = await f.agent(alice, { image: 'https://cdn.example.com/a.png' });
      const start = async (n: number) => {
        for (let i = 0; i < n; i++) {
          const res = await t.rest('POST', '/v2/threads', { key: alice.apiKey, body: { agent_id: agent.id, content: `Hello ${i}` } });
          // Named once its reply has ended: the title's write must not fall into a count below.
          await titledSession(t, alice, res.body.thread_id);
        }
      };
      await start(2);
      const small = await statementsFor(`/v2/threads?agent_id=${agent.id}&limit=100`);
      expect(small.body.docs).toHaveLength(2);
      await start(10);
      const large = await statementsFor(`/v2/threads?agent_id=${agent.id}&limit=100`);
      expect(large.body.docs).toHaveLength(12);
      expect(large.body.docs.every((d: { agent: { _id: string } }) => d.agent._id === agent.id)).toBe(true);
      expect(large.count).toBe(small.count);
    });
  });
});

describe('headers', () => {
  /** What a browser on another site, and one on an allowed site, gets from REST and GraphQL. */
  let open: TestApp;
  let listed: TestApp;
  let alice: TestUser;
  const APP = 'https://app.example.com';
  const ADMIN = 'https://admin.example.com';

  setUp(async (start) => {
    listed = await start.app({ http: { corsOrigins: [APP, ADMIN] } });
  });
  beforeAll(async () => {
    open = app;
    alice = await open.createUser('alice-headers');
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

    it('a preflight grants the methods the API uses and no others; scripts may read Allow, Retry-After, RateLimit-* and Mcp-Session-Id', async () => {
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
        'Mcp-Session-Id',
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
});
