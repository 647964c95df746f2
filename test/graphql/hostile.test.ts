import { isObjectType, getIntrospectionQuery, parse } from 'graphql';
import { describe, expect, it, afterAll, beforeAll } from 'vitest';
import { schema } from '../../src/graphql/schema.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { expectCleanErrors, postRaw } from './support.ts';
import { graphqlWsClients, wsExecute } from '../helpers/graphql-ws.ts';
import { unsafeUrls } from '../helpers/unsafe-urls.ts';

/**
 * What an attacker with a key of their own sends to GraphQL: crafted paging arguments and misspelt
 * names, documents built to cost the server far more than the client, and hostile values in inputs.
 * One app for all (each start makes and migrates a database); each describe has users of its own.
 * Its agents per user are capped low, for the hostile inputs to reach the cap quickly.
 */
const MAX_AGENTS = 3;

let app: TestApp;

setUp(async (start) => {
  app = await start.app({ maxAgentsPerUser: MAX_AGENTS });
});

describe('hostile-args', () => {
  /** Paging arguments and misspelt names as an attacker crafts them, against every Prisma connection. */
  let t: TestApp;
  let alice: TestUser;
  const logged: unknown[] = [];
  /** A creation in two collections of alice's, for the connections between them. */
  let held: { creation: string; collection: string };

  beforeAll(async () => {
    t = app;
    alice = await t.createUser('alice-args');
    const agent = await fixtures(t).agent(alice);
    const creation = await fixtures(t).creation(alice, { agentId: agent.id });
    await fixtures(t).agent(alice);
    const collection = await t.services.collections.create(alice, { name: 'Kept', creationIds: [creation.id] });
    await t.services.collections.create(alice, { name: 'Kept too', creationIds: [creation.id] });
    held = { creation: creation.id, collection: collection.id };
    const log = t.app.http.log;
    const error = log.error.bind(log);
    log.error = ((...args: Parameters<typeof error>) => {
      logged.push(args);
      return error(...args);
    }) as typeof log.error;
  });

  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const craftedCursors = [
    b64('GPC:N:1'),
    b64('GPC:D:notadate'),
    b64('GPC:D:1700000000000'),
    b64('GPC:J:{"id":"x"}'),
    b64('GPC:O:{"id":"x"}'),
    b64('GPC:T:["S:a","S:b"]'),
    b64('GPC:Z:'),
    b64('GPC:B:AAAA'),
    b64('GPC:I:12'),
    b64('GPC:S:nul\u0000byte'),
    b64('GPC:X:1'),
    b64('not a cursor'),
    '%%%',
  ];

  /** Every relation connection in the schema (Pothos Prisma's `relatedConnection`). */
  const prismaConnections = Object.values(schema.getTypeMap())
    .filter(isObjectType)
    .flatMap((type) =>
      Object.values(type.getFields())
        .filter((f) => f.extensions?.pothosPrismaRelationField && f.args.some((a) => a.name === 'after'))
        .map((f) => `${type.name}.${f.name}`),
    );

  async function page(field: string, args: string, variables: Record<string, unknown> = {}) {
    const declared = args.includes('$c') ? '($c: String)' : '';
    const { json } = await postRaw(
      t,
      { query: `query${declared} { me { ${field}(${args}) { edges { cursor node { id } } } } }`, variables },
      alice.apiKey,
    );
    return json as { data: any; errors?: { message: string; extensions?: { code?: string; field?: string } }[] };
  }

  describe('pagination arguments of Prisma connections', () => {
    it('are all reachable here (a new connection needs its attack test)', () => {
      expect(prismaConnections.sort()).toEqual(['Creator.agents', 'Creator.collections', 'Creator.creations']);
    });

    it.each(['agents', 'creations', 'collections'])('a real cursor pages me.%s', async (field) => {
      const first = await page(field, 'first: 1');
      expect(first.errors).toBeUndefined();
      const next = await page(field, 'first: 1, after: $c', { c: first.data.me[field].edges[0].cursor });
      expect(next.errors).toBeUndefined();
    });

    it.each(['agents', 'creations', 'collections'])(
      'every crafted cursor on me.%s is BAD_USER_INPUT "Invalid cursor", and nothing is logged',
      async (field) => {
        for (const cursor of craftedCursors) {
          for (const arg of ['first: 2, after: $c', 'last: 2, before: $c']) {
            const response = await page(field, arg, { c: cursor });
            expect(response.errors, `${arg} ${cursor}`).toHaveLength(1);
            expect(response.errors![0]).toMatchObject({ message: 'Invalid cursor', extensions: { code: 'BAD_USER_INPUT' } });
            expectCleanErrors(response.errors);
          }
        }
        expect(logged).toEqual([]);
      },
    );

    it.each([
      ['first: -1', 'first: must not be negative', 'first'],
      ['last: -5', 'last: must not be negative', 'last'],
      ['first: 1, last: 1, after: $c', 'last: Page forwards with first and after, or backwards with last and before', 'last'],
      ['first: 1, before: $c', 'first: Page forwards with first and after, or backwards with last and before', 'first'],
      ['after: $c, before: $c', 'before: Page with either after or before, not both', 'before'],
    ])('%s is BAD_USER_INPUT naming the argument', async (args, message, field) => {
      for (const connection of ['agents', 'creations', 'collections']) {
        const response = await page(connection, args, { c: b64('GPC:S:x') });
        expect(response.errors?.[0]).toMatchObject({ message, extensions: { code: 'BAD_USER_INPUT', field } });
      }
      expect(logged).toEqual([]);
    });
  });

  /**
   * Connections of join rows (`prismaConnectionHelpers`: a collection's creations, a creation's
   * collections) carry no mark the plugin knows; their fields check the same arguments themselves.
   */
  describe('pagination arguments of connections through collections', () => {
    const through =
      (field: 'creations' | 'collections') =>
      async (args: string, variables: Record<string, unknown> = {}) => {
        const declared = args.includes('$c') ? '($c: String)' : '';
        const root = field === 'creations' ? `collection(id: "${held.collection}")` : `creation(id: "${held.creation}")`;
        const { json } = await postRaw(
          t,
          { query: `query${declared} { ${root} { ${field}(${args}) { edges { cursor } } } }`, variables },
          alice.apiKey,
        );
        return json as { data: any; errors?: { message: string; extensions?: { code?: string; field?: string } }[] };
      };

    it.each(['creations', 'collections'] as const)('a real cursor pages %s, also asking for cursors only', async (field) => {
      const page = through(field);
      const first = await page('first: 1');
      expect(first.errors).toBeUndefined();
      const edges = first.data[field === 'creations' ? 'collection' : 'creation'][field].edges;
      expect(edges).toHaveLength(1);
      const next = await page('first: 1, after: $c', { c: edges[0].cursor });
      expect(next.errors).toBeUndefined();
    });

    it.each(['creations', 'collections'] as const)(
      'every crafted cursor on %s is BAD_USER_INPUT "Invalid cursor", and nothing is logged',
      async (field) => {
        const page = through(field);
        for (const cursor of craftedCursors) {
          for (const arg of ['first: 2, after: $c', 'last: 2, before: $c']) {
            const response = await page(arg, { c: cursor });
            expect(response.errors, `${arg} ${cursor}`).toHaveLength(1);
            expect(response.errors![0]).toMatchObject({ message: 'Invalid cursor', extensions: { code: 'BAD_USER_INPUT' } });
            expectCleanErrors(response.errors);
          }
        }
        const negative = await page('first: -1');
        expect(negative.errors?.[0]).toMatchObject({
          message: 'first: must not be negative',
          extensions: { code: 'BAD_USER_INPUT', field: 'first' },
        });
        expect(logged).toEqual([]);
      },
    );
  });

  describe('suggestions are hidden', () => {
    const updateAgent = 'mutation($i: UpdateAgentInput!) { updateAgent(id: "x", input: $i) { id } }';

    it.each([
      ['a misspelt field in a variable', updateAgent, { i: { personna: 'x' } }],
      ['a misspelt enum value in a variable', updateAgent, { i: { ownerPays: 'FUL' } }],
      ['a misspelt nested enum value in a variable', updateAgent, { i: { llmSettings: { modelProfile: 'HIG' } } }],
      ['a misspelt enum value in the query text', 'mutation { updateAgent(id: "x", input: { ownerPays: FUL }) { id } }', {}],
      ['a misspelt field in the query text', '{ me { usernam } }', {}],
      ['a misspelt argument', '{ me { agents(frist: 1) { edges { cursor } } } }', {}],
    ])('%s: no "Did you mean", with or without a key', async (_name, query, variables) => {
      for (const key of [alice.apiKey, null]) {
        const { text, json } = await postRaw(t, { query, variables }, key);
        expect(json.errors.length).toBeGreaterThan(0);
        expect(text).not.toMatch(/Did you mean|persona"|"FULL"|"HIGH"|username"|"first"/);
      }
    });
  });
});

describe('hostile-documents', () => {
  /**
   * Documents built to cost the server far more than they cost the client. Each is refused
   * before anything runs, with a message that says which limit and a code, over HTTP and over
   * graphql-ws alike; none is a 5xx, and the server answers normally afterwards.
   */
  let t: TestApp;
  let alice: TestUser;
  const ws = graphqlWsClients(() => t.url);

  beforeAll(async () => {
    t = app;
    alice = await t.createUser('alice-documents');
  });
  afterAll(async () => {
    await ws.disposeAll();
  });

  const repeat = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i)).join(' ');
  const nested = (levels: number, inner: string) =>
    `${'agents(first: 1) { edges { node { owner { '.repeat(levels)}${inner}${' } } } }'.repeat(levels)}`;

  /** The standard introspection query's selection, to repeat under aliases. */
  const introspection = getIntrospectionQuery();
  const schemaSelection = introspection.slice(
    introspection.indexOf('{') + 1,
    introspection.lastIndexOf('}', introspection.indexOf('fragment FullType')),
  );
  const introspectionFragments = introspection.slice(introspection.indexOf('fragment FullType'));

  const hostile: { name: string; query: string; code: string; message: RegExp }[] = [
    {
      name: 'deep nesting',
      query: `{ me { ${nested(4, 'username')} } }`,
      code: 'DEPTH_LIMIT_EXCEEDED',
      message: /^Query depth limit of 12 exceeded, found \d+\.$/,
    },
    {
      name: 'an alias bomb',
      query: `{ me { ${repeat(31, (i) => `a${i}: username`)} } }`,
      code: 'ALIAS_LIMIT_EXCEEDED',
      message: /^Aliases limit of 30 exceeded, found 31\.$/,
    },
    {
      name: 'aliases multiplied through a fragment spread twice',
      query: `{ me { ...A ... on Creator { ...A } } } fragment A on Creator { ${repeat(20, (i) => `x${i}: username`)} }`,
      code: 'ALIAS_LIMIT_EXCEEDED',
      message: /^Aliases limit of 30 exceeded, found 40\.$/,
    },
    {
      name: 'a huge token count',
      query: `{ me { ${'username '.repeat(6000)} } }`,
      code: 'TOKEN_LIMIT_EXCEEDED',
      message: /^Token limit of 5000 exceeded\.$/,
    },
    {
      name: 'lists within lists (cost)',
      query: `{ me { agents(first: 100) { edges { node { owner { agents(first: 100) { edges { node { owner { agents(first: 100) { edges { node { id } } } } } } } } } } } } }`,
      code: 'COST_LIMIT_EXCEEDED',
      message: /^Query Cost limit of 20000 exceeded, found [\d.]+\.$/,
    },
    {
      name: 'one field repeated thousands of times',
      query: `{ me { ${'username '.repeat(4000)} } }`,
      code: 'QUERY_TOO_COMPLEX',
      message: /^The document is too complex to validate/,
    },
    {
      name: 'a pile of directives',
      query: `{ me { username ${'@include(if: true) '.repeat(60)} } }`,
      code: 'DIRECTIVE_LIMIT_EXCEEDED',
      message: /^Directives limit of 50 exceeded, found 60\.$/,
    },
    {
      name: 'the whole schema under many aliases',
      query: `{ ${repeat(30, (i) => `s${i}: ${schemaSelection}`)} } ${introspectionFragments}`,
      code: 'INTROSPECTION_LIMIT_EXCEEDED',
      message: /^Introspection limit exceeded: __schema may be asked once per operation, found 30\.$/,
    },
    {
      name: 'the schema asked twice through fragments',
      query: `query { ...A ...B } fragment A on Query { a: __schema { types { name } } } fragment B on Query { b: __schema { types { name } } }`,
      code: 'INTROSPECTION_LIMIT_EXCEEDED',
      message: /found 2\.$/,
    },
    {
      name: 'introspection nested through the type graph',
      query: `{ __schema { types { ${'fields { type { '.repeat(6)}name${' } }'.repeat(6)} } } }`,
      code: 'GRAPHQL_VALIDATION_FAILED',
      message: /^Maximum introspection depth exceeded$/,
    },
    {
      name: 'a fragment cycle',
      query: 'query { me { ...A } } fragment A on Creator { username ...B } fragment B on Creator { id ...A }',
      code: 'GRAPHQL_VALIDATION_FAILED',
      message: /^Cannot spread fragment "A" within itself via "B"\.$/,
    },
    {
      name: 'a fragment spreading itself',
      query: 'query { me { ...A } } fragment A on Creator { username ...A }',
      code: 'GRAPHQL_VALIDATION_FAILED',
      message: /^Cannot spread fragment "A" within itself\.$/,
    },
    {
      name: 'fragments doubling at every level (billion laughs)',
      query: `{ me { ...F0 } } ${repeat(16, (i) => `fragment F${i} on Creator { username ...F${i + 1} ... on Creator { ...F${i + 1} } }`)} fragment F16 on Creator { id }`,
      code: 'COST_LIMIT_EXCEEDED',
      message: /^Query Cost limit of 20000 exceeded/,
    },
  ];

  describe('hostile GraphQL documents over HTTP', () => {
    it.each(hostile)('$name is refused with $code', async ({ query, code, message }) => {
      const res = await postRaw(t, { query }, alice.apiKey);
      expect(res.status).toBe(400);
      expect(res.json.data ?? null).toBeNull();
      expect(res.json.errors[0].extensions.code).toBe(code);
      expect(res.json.errors[0].message).toMatch(message);
      expectCleanErrors(res.json.errors);
    });

    it('batched requests (an array of operations) are not accepted', async () => {
      const res = await postRaw(t, [{ query: '{ me { id } }' }, { query: '{ me { username } }' }], alice.apiKey);
      expect(res.status).toBe(400);
      expect(res.json.errors).toEqual([{ message: 'Batching is not supported.', extensions: { code: 'BAD_REQUEST' } }]);
    });

    it('within the limits, the same shapes are answered: the standard introspection query, a field repeated a few hundred times', async () => {
      const schema = await postRaw(t, { query: introspection }, alice.apiKey);
      expect(schema.status).toBe(200);
      expect(schema.json.data.__schema.types.length).toBeGreaterThan(50);
      const repeated = await postRaw(t, { query: `{ me { ${'username '.repeat(500)} } }` }, alice.apiKey);
      expect(repeated.json).toEqual({ data: { me: { username: alice.username } } });
    });
  });

  describe('hostile GraphQL documents over graphql-ws', () => {
    it('each is answered with an error for its operation, with the same code, and the socket goes on', async () => {
      const client = ws.connect(alice.apiKey);
      for (const { name, query, code } of hostile) {
        const refusal = await wsExecute(client, parse(query, { noLocation: true })).then(
          (result) => ({ result }),
          (errors: { extensions?: { code?: string } }[]) => ({ errors }),
        );
        expect({ name, code: 'errors' in refusal ? refusal.errors[0]?.extensions?.code : refusal }).toEqual({ name, code });
      }
      expect((await wsExecute(client, parse('{ me { username } }'))).data).toEqual({ me: { username: alice.username } });
    });
  });
});

describe('hostile-input', () => {
  /** The same attacks as over REST, through GraphQL inputs; limits are small to reach them quickly. */

  let t: TestApp;
  let alice: TestUser;
  let bob: TestUser;

  beforeAll(async () => {
    t = app;
    alice = await t.createUser('alice');
    bob = await t.createUser('bob');
  });

  async function gql(user: TestUser, query: string, variables: Record<string, unknown> = {}) {
    const { json } = await postRaw(t, { query, variables }, user.apiKey);
    return json as { data: any; errors?: { message: string; extensions?: { code?: string; field?: string } }[] };
  }

  function expectCode(response: Awaited<ReturnType<typeof gql>>, code: string, message: string, field?: string) {
    expect(response.errors, JSON.stringify(response)).toHaveLength(1);
    expect(response.errors![0]).toMatchObject({ message, extensions: { code, ...(field ? { field } : {}) } });
    expectCleanErrors(response.errors);
  }

  const createAgent = 'mutation($input: CreateAgentInput!) { createAgent(input: $input) { id key } }';
  const updateAgent = 'mutation($id: ID!, $input: UpdateAgentInput!) { updateAgent(id: $id, input: $input) { id image } }';

  describe('URLs a user gives are http or https only', () => {
    let agent: { id: string };
    beforeAll(async () => {
      agent = await fixtures(t).agent(alice, { image: 'https://cdn.example.com/a.png' });
    });

    it.each(unsafeUrls)('%j is BAD_USER_INPUT in agent and concept inputs and attachments', async (url) => {
      expectCode(
        await gql(alice, updateAgent, { id: agent.id, input: { image: url } }),
        'BAD_USER_INPUT',
        'image: must be an http or https URL',
        'image',
      );
      const concept = await fixtures(t).concept(alice);
      expectCode(
        await gql(alice, 'mutation($id: ID!, $input: UpdateConceptInput!) { updateConcept(id: $id, input: $input) { id } }', {
          id: concept.id,
          input: { images: [{ image: 'https://example.com/ok.png' }, { image: url }] },
        }),
        'BAD_USER_INPUT',
        'images[1].image: must be an http or https URL',
        'images.1.image',
      );
      expectCode(
        await gql(alice, 'mutation($input: SendMessageInput!) { sendMessage(input: $input) { promptId } }', {
          input: { agentIds: [agent.id], content: 'look', attachments: [url] },
        }),
        'BAD_USER_INPUT',
        'attachments[0]: must be an http or https URL',
        'attachments.0',
      );
      expect((await t.db.agent.findUniqueOrThrow({ where: { id: agent.id } })).image).toBe('https://cdn.example.com/a.png');
      expect((await t.db.conceptImage.findMany({ where: { conceptId: concept.id } })).map((i) => i.image)).toEqual([
        'https://example.com/a.jpg',
      ]);
    });
  });

  describe('look-alike agent keys', () => {
    it("an agent named with another user's name in other letters is CONFLICT", async () => {
      for (const key of ['ALICE', 'Alice'])
        expectCode(await gql(bob, createAgent, { input: { name: 'Alice', key } }), 'CONFLICT', 'An agent with this key already exists');
      // Full-width letters are not allowed in keys at all; the database would refuse them as "alice" too.
      expect((await gql(bob, createAgent, { input: { name: 'Alice', key: 'ａｌｉｃｅ' } })).errors?.[0]?.extensions?.code).toBe(
        'BAD_USER_INPUT',
      );
      expect(await t.db.user.count({ where: { username: { in: ['ALICE', 'Alice', 'ａｌｉｃｅ'] } } })).toBe(0);
    });
  });

  describe('tools named like prototype members', () => {
    it('tools.constructor is an unknown tool, named as sent', async () => {
      const agent = await fixtures(t).agent(bob);
      expectCode(
        await gql(bob, updateAgent, { id: agent.id, input: { tools: { constructor: true } } }),
        'BAD_USER_INPUT',
        'tools.constructor: unknown tool "constructor" (see the tools list)',
        'tools.constructor',
      );
    });
  });

  describe('agents per user', () => {
    it(`are capped at ${MAX_AGENTS}, even when created all at once, with an error that says the limit`, async () => {
      const carol = await t.createUser('carol');
      const attempts = await Promise.all(
        Array.from({ length: MAX_AGENTS + 3 }, (_, i) => gql(carol, createAgent, { input: { name: `Squat ${i}`, key: `squat-${i}` } })),
      );
      const created = attempts.filter((r) => r.data?.createAgent);
      const refused = attempts.filter((r) => r.errors);
      expect(created).toHaveLength(MAX_AGENTS);
      expect(refused).toHaveLength(3);
      for (const r of refused) expectCode(r, 'BAD_USER_INPUT', `Agent limit reached: a user may own at most ${MAX_AGENTS} agents`);
      expect(await t.db.agent.count({ where: { ownerId: carol.id } })).toBe(MAX_AGENTS);
      expect(await t.db.user.count({ where: { username: { startsWith: 'squat-' } } })).toBe(MAX_AGENTS);
    });
  });
});
