import { getIntrospectionQuery, parse } from 'graphql';
import { afterAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { graphqlWsClients, wsExecute } from '../helpers/graphql-ws.ts';
import { setUp } from '../helpers/set-up.ts';
import { expectCleanErrors, postRaw } from './support.ts';

/**
 * Documents built to cost the server far more than they cost the client. Each is refused
 * before anything runs, with a message that says which limit and a code, over HTTP and over
 * graphql-ws alike; none is a 5xx, and the server answers normally afterwards.
 */
let t: TestApp;
let alice: TestUser;
const ws = graphqlWsClients(() => t.url);

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
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
    expect(repeated.json).toEqual({ data: { me: { username: 'alice' } } });
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
    expect((await wsExecute(client, parse('{ me { username } }'))).data).toEqual({ me: { username: 'alice' } });
  });
});
