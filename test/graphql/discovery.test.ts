import { beforeAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import type { DiscoverAgentsQueryVariables } from './generated/graphql.ts';
import { expectData, expectGraphQLError } from './support.ts';

const DiscoverAgents = graphql(`
  query DiscoverAgents($filter: AgentFilter, $first: Int, $after: String, $last: Int, $before: String) {
    agents(filter: $filter, first: $first, after: $after, last: $last, before: $before) {
      edges { cursor node { id rawId name public owner { id } } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
`);
const DiscoverModels = graphql(`
  query DiscoverModels($filter: ModelFilter, $first: Int, $after: String, $last: Int, $before: String) {
    models(filter: $filter, first: $first, after: $after, last: $last, before: $before) {
      edges { cursor node { id rawId name public baseModel } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
`);
const DiscoverCreations = graphql(`
  query DiscoverCreations($filter: CreationFilter, $first: Int, $after: String, $last: Int, $before: String) {
    creations(filter: $filter, first: $first, after: $after, last: $last, before: $before) {
      edges { cursor node { id rawId name public toolKey } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
`);

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
let f: ReturnType<typeof fixtures>;
/** Ids in the order they were made (oldest first). */
const agents: Record<string, string> = {};
const globalId = (type: string, id: string) => Buffer.from(`${type}:${id}`).toString('base64');
const tick = () => new Promise((r) => setTimeout(r, 3));

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  f = fixtures(t);
  const made: [string, TestUser, Record<string, unknown>][] = [
    ['alicePublic', alice, { name: 'Lighthouse Keeper', public: true }],
    ['alicePrivate', alice, { name: 'Diary', public: false, description: 'keeps my SECRETS' }],
    ['bobPublic', bob, { name: 'Chess Coach', public: true, key: 'grandmaster-bob' }],
    ['bobPrivate', bob, { name: 'Bob Private Lighthouse', public: false }],
    ['bobPublic2', bob, { name: 'Poet', public: true }],
  ];
  for (const [name, owner, fields] of made) {
    agents[name] = (await f.agent(owner, fields)).id;
    await tick();
  }
});

type Page = { edges: { cursor: string; node: { rawId: string } }[]; pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean } };

/** Every id of a connection, paging forward with `first: size` until the end. */
async function forward(run: (v: { first: number; after?: string }) => Promise<Page>, size = 2) {
  const ids: string[] = [];
  let after: string | undefined;
  for (let guard = 0; guard < 50; guard++) {
    const page = await run({ first: size, after });
    ids.push(...page.edges.map((e) => e.node.rawId));
    if (!page.pageInfo.hasNextPage) return ids;
    after = page.edges.at(-1)!.cursor;
  }
  throw new Error('paging did not end');
}
/** The same, backward with `last: size` and `before`, returned in the connection's order. */
async function backward(run: (v: { last: number; before?: string }) => Promise<Page>, size = 2) {
  const pages: string[][] = [];
  let before: string | undefined;
  for (let guard = 0; guard < 50; guard++) {
    const page = await run({ last: size, before });
    pages.unshift(page.edges.map((e) => e.node.rawId));
    if (!page.pageInfo.hasPreviousPage) return pages.flat();
    before = page.edges[0]!.cursor;
  }
  throw new Error('paging did not end');
}

describe('agents', () => {
  const list = async (variables: DiscoverAgentsQueryVariables, key = alice.apiKey) =>
    expectData(await t.gql(DiscoverAgents, variables, key)).agents;

  it("lists the viewer's own and public agents newest first, never a stranger's private one", async () => {
    const ids = (await list({})).edges.map((e) => e.node.rawId);
    expect(ids).toEqual([agents.bobPublic2, agents.bobPublic, agents.alicePrivate, agents.alicePublic]);
    const bobs = (await list({}, bob.apiKey)).edges.map((e) => e.node.rawId);
    expect(bobs).toEqual([agents.bobPublic2, agents.bobPrivate, agents.bobPublic, agents.alicePublic]);
  });

  it('pages forward and backward over the same list', async () => {
    const all = (await list({})).edges.map((e) => e.node.rawId);
    expect(await forward((v) => list(v))).toEqual(all);
    expect(await forward((v) => list(v), 3)).toEqual(all);
    expect(await backward((v) => list(v))).toEqual(all);
    const firstTwo = await list({ first: 2 });
    expect(firstTwo.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
  });

  it('filters by text (name, key, description; any case), owner (raw or global id) and public', async () => {
    const ids = async (filter: object, key = alice.apiKey) => (await list({ filter }, key)).edges.map((e) => e.node.rawId);
    expect(await ids({ text: 'lighthouse' })).toEqual([agents.alicePublic]);
    expect(await ids({ text: 'LIGHTHOUSE' }, bob.apiKey)).toEqual([agents.bobPrivate, agents.alicePublic]);
    expect(await ids({ text: 'grandMASTER' })).toEqual([agents.bobPublic]);
    expect(await ids({ text: 'secrets' })).toEqual([agents.alicePrivate]);
    expect(await ids({ text: 'secrets' }, bob.apiKey)).toEqual([]);
    expect(await ids({ owner: bob.id })).toEqual([agents.bobPublic2, agents.bobPublic]);
    expect(await ids({ owner: globalId('Creator', bob.id) })).toEqual([agents.bobPublic2, agents.bobPublic]);
    expect(await ids({ public: false })).toEqual([agents.alicePrivate]);
    expect(await ids({ public: false, owner: bob.id })).toEqual([]);
    expect(await ids({ public: true })).toEqual([agents.bobPublic2, agents.bobPublic, agents.alicePublic]);
    expect(await ids({ text: '  ' })).toHaveLength(4);
  });

  it('refuses crafted cursors and contradictory paging as BAD_USER_INPUT', async () => {
    const forged = Buffer.from('GPC:N:1').toString('base64');
    const crafted: DiscoverAgentsQueryVariables[] = [
      { after: 'not-a-cursor', first: 1 },
      { after: forged, first: 1 },
      { before: Buffer.from('GPC:J:{"a":1}').toString('base64'), last: 1 },
    ];
    for (const variables of crafted) {
      expect(expectGraphQLError(await t.gql(DiscoverAgents, variables, alice.apiKey), 'BAD_USER_INPUT').message).toBe('Invalid cursor');
    }
    expectGraphQLError(await t.gql(DiscoverAgents, { first: -1 }, alice.apiKey), 'BAD_USER_INPUT');
    expectGraphQLError(
      await t.gql(DiscoverAgents, { first: 1, last: 1, after: (await list({ first: 1 })).edges[0]!.cursor }, alice.apiKey),
      'BAD_USER_INPUT',
    );
    expectGraphQLError(await t.gql(DiscoverAgents, { filter: { text: 'x'.repeat(201) } }, alice.apiKey), 'BAD_USER_INPUT');
  });

  it('needs an API key', async () => {
    expectGraphQLError(await t.gql(DiscoverAgents, {}), 'UNAUTHENTICATED');
  });
});

describe('models', () => {
  const models: Record<string, string> = {};
  beforeAll(async () => {
    for (const [name, owner, fields] of [
      ['alicePublic', alice, { public: true, name: 'Watercolor' }],
      ['alicePrivate', alice, { public: false, name: 'My Face' }],
      ['bobPrivate', bob, { public: false, name: 'Bob Face' }],
      ['bobPublic', bob, { public: true, name: 'Ink Wash' }],
    ] as const) {
      models[name] = (await f.model(owner, fields)).id;
      await tick();
    }
  });
  const ids = async (variables: object, key = alice.apiKey) =>
    expectData(await t.gql(DiscoverModels, variables, key)).models.edges.map((e) => e.node.rawId);

  it('lists the models a user may use, newest first, with filters and paging both ways', async () => {
    expect(await ids({})).toEqual([models.bobPublic, models.alicePrivate, models.alicePublic]);
    expect(await ids({}, bob.apiKey)).toEqual([models.bobPublic, models.bobPrivate, models.alicePublic]);
    expect(await ids({ filter: { text: 'face' } })).toEqual([models.alicePrivate]);
    expect(await ids({ filter: { owner: globalId('Creator', bob.id) } })).toEqual([models.bobPublic]);
    expect(await ids({ filter: { public: false } })).toEqual([models.alicePrivate]);
    expect(await ids({ filter: { baseModel: 'sdxl' } })).toEqual([]);
    const run = async (v: object) => expectData(await t.gql(DiscoverModels, v, alice.apiKey)).models;
    expect(await forward(run, 1)).toEqual(await ids({}));
    expect(await backward(run, 2)).toEqual(await ids({}));
    expect(expectGraphQLError(await t.gql(DiscoverModels, { after: 'garbage', first: 1 }, alice.apiKey), 'BAD_USER_INPUT').message).toBe(
      'Invalid cursor',
    );
  });
});

describe('creations', () => {
  const creations: Record<string, string> = {};
  beforeAll(async () => {
    for (const [name, owner, fields] of [
      ['alicePublic', alice, { public: true, agentId: agents.alicePublic }],
      ['alicePrivate', alice, { public: false, tool: 'txt2vid' }],
      ['aliceDeleted', alice, { public: true, deleted: true }],
      ['bobPrivate', bob, { public: false }],
      ['bobPublic', bob, { public: true, tool: 'txt2vid' }],
    ] as const) {
      creations[name] = (await f.creation(owner, fields)).id;
      await tick();
    }
  });
  const ids = async (variables: object, key = alice.apiKey) =>
    expectData(await t.gql(DiscoverCreations, variables, key)).creations.edges.map((e) => e.node.rawId);

  it("is a feed of public creations and the viewer's own, newest first, never deleted ones or a stranger's private ones", async () => {
    expect(await ids({})).toEqual([creations.bobPublic, creations.alicePrivate, creations.alicePublic]);
    expect(await ids({}, bob.apiKey)).toEqual([creations.bobPublic, creations.bobPrivate, creations.alicePublic]);
  });

  it('filters by owner, agent, tool, public and text, and pages both ways', async () => {
    expect(await ids({ filter: { owner: bob.id } })).toEqual([creations.bobPublic]);
    expect(await ids({ filter: { agent: globalId('Agent', agents.alicePublic!) } })).toEqual([creations.alicePublic]);
    expect(await ids({ filter: { agent: agents.alicePublic } })).toEqual([creations.alicePublic]);
    expect(await ids({ filter: { tool: 'txt2vid' } })).toEqual([creations.bobPublic, creations.alicePrivate]);
    expect(await ids({ filter: { public: false } })).toEqual([creations.alicePrivate]);
    expect(await ids({ filter: { text: 'no such name' } })).toEqual([]);
    const run = async (v: object) => expectData(await t.gql(DiscoverCreations, v, alice.apiKey)).creations;
    expect(await forward(run, 2)).toEqual(await ids({}));
    expect(await backward(run, 1)).toEqual(await ids({}));
  });
});
