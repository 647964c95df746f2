import { isObjectType } from 'graphql';
import { describe, expect, it } from 'vitest';
import { schema } from '../../src/graphql/schema.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { expectCleanErrors, postRaw } from './support.ts';

/** Paging arguments and misspelt names as an attacker crafts them, against every Prisma connection. */
let t: TestApp;
let alice: TestUser;
const logged: unknown[] = [];
/** A creation in two collections of alice's, for the connections between them. */
let held: { creation: string; collection: string };

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
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
