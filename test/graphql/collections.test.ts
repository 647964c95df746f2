import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';

const CollectionCreate = graphql(`
  mutation CollectionCreate($input: CreateCollectionInput!) {
    createCollection(input: $input) { id rawId name description public owner { username } creationCount }
  }
`);
const CollectionRead = graphql(`
  query CollectionRead($id: ID!, $first: Int, $after: String) {
    collection(id: $id) {
      id name public creationCount
      cover { rawId }
      creations(first: $first, after: $after) { edges { cursor node { rawId name creator { username } } } pageInfo { hasNextPage endCursor } }
    }
  }
`);
const CollectionNode = graphql(`
  query CollectionNode($id: ID!) {
    node(id: $id) { id ... on Collection { name owner { username } } }
  }
`);
const CollectionUpdate = graphql(`
  mutation CollectionUpdate($id: ID!, $input: UpdateCollectionInput!) {
    updateCollection(id: $id, input: $input) { name description public }
  }
`);
const CollectionAdd = graphql(`
  mutation CollectionAdd($id: ID!, $creationIds: [ID!]!) {
    addCreationsToCollection(id: $id, creationIds: $creationIds) { creationCount creations(first: 10) { edges { node { rawId } } } }
  }
`);
const CollectionRemove = graphql(`
  mutation CollectionRemove($id: ID!, $creationIds: [ID!]!) {
    removeCreationsFromCollection(id: $id, creationIds: $creationIds) { creationCount }
  }
`);
const CollectionDelete = graphql(`
  mutation CollectionDelete($id: ID!) { deleteCollection(id: $id) }
`);
const CreatorCollections = graphql(`
  query CreatorCollections($id: ID!) {
    creator(id: $id) { username balance collections(first: 10) { edges { node { name public creationCount cover { rawId } } } } }
  }
`);
const CreationCollections = graphql(`
  query CreationCollections($id: ID!) {
    creation(id: $id) { collections(first: 10) { edges { node { name owner { username } } } } }
  }
`);
const ChangeCreations = graphql(`
  mutation ChangeCreations($ids: [ID!]!, $input: UpdateCreationInput!) {
    updateCreations(ids: $ids, input: $input) { rawId name public }
  }
`);
const DeleteCreations = graphql(`
  mutation DeleteCreations($ids: [ID!]!) { deleteCreations(ids: $ids) }
`);
const ChangeModel = graphql(`
  mutation ChangeModel($id: ID!, $input: UpdateModelInput!) { updateModel(id: $id, input: $input) { rawId name public } }
`);
const RemoveAgent = graphql(`
  mutation RemoveAgent($id: ID!) { deleteAgent(id: $id) }
`);

describe('collections over GraphQL', () => {
  let t: TestApp;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;
  let bob: TestUser;

  setUp(async (start) => {
    t = await start.app();
    f = fixtures(t);
    [alice, bob] = [await t.createUser('alice'), await t.createUser('bob')];
  });

  const create = async (user: TestUser, input: { name: string; public?: boolean; creationIds?: string[] }) =>
    expectData(await t.gql(CollectionCreate, { input }, user.apiKey)).createCollection;
  const read = async (user: TestUser, id: string, first = 10) =>
    expectData(await t.gql(CollectionRead, { id, first }, user.apiKey)).collection;
  const ids = (c: { creations: { edges: { node: { rawId: string } }[] } }) => c.creations.edges.map((e) => e.node.rawId);

  it('creates a collection that is a Node; each reader is shown what both they and its owner may see', async () => {
    const hidden = await f.creation(alice, { public: false });
    const open = await f.creation(alice);
    const bobs = await f.creation(bob);
    const made = await create(alice, { name: 'Mixed', creationIds: [hidden.id, open.id, bobs.id] });
    expect(made).toMatchObject({ name: 'Mixed', description: '', public: true, owner: { username: 'alice' }, creationCount: 3 });
    expect(expectData(await t.gql(CollectionNode, { id: made.id }, bob.apiKey)).node).toMatchObject({
      name: 'Mixed',
      owner: { username: 'alice' },
    });

    const forAlice = await read(alice, made.id);
    expect(ids(forAlice)).toEqual([hidden.id, open.id, bobs.id]);
    expect(forAlice).toMatchObject({ creationCount: 3, cover: { rawId: hidden.id } });
    const forBob = await read(bob, made.rawId);
    expect(ids(forBob)).toEqual([open.id, bobs.id]);
    expect(forBob).toMatchObject({ creationCount: 2, cover: { rawId: open.id } });
  });

  it('pages its creations forwards with cursors, in the order they were added; a bad cursor is bad input', async () => {
    const made = await create(alice, {
      name: 'Paged',
      creationIds: (await Promise.all([1, 2, 3, 4, 5].map(() => f.creation(alice)))).map((c) => c.id),
    });
    const first = await read(alice, made.id, 2);
    expect(first.creations.pageInfo.hasNextPage).toBe(true);
    const rest = expectData(
      await t.gql(CollectionRead, { id: made.id, first: 10, after: first.creations.pageInfo.endCursor }, alice.apiKey),
    );
    expect([...ids(first), ...ids(rest.collection)]).toEqual(ids(await read(alice, made.id, 10)));
    expect(ids(rest.collection)).toHaveLength(3);
    expectGraphQLError(await t.gql(CollectionRead, { id: made.id, first: 2, after: 'bm9wZQ==' }, alice.apiKey), 'BAD_USER_INPUT');
  });

  it("someone else's private collection is NOT_FOUND; their public one can be read but not changed", async () => {
    const c = await f.creation(alice);
    const secret = await create(alice, { name: 'Secret', public: false, creationIds: [c.id] });
    const open = await create(alice, { name: 'Open', creationIds: [c.id] });
    expectGraphQLError(await t.gql(CollectionRead, { id: secret.id }, bob.apiKey), 'NOT_FOUND');
    expectGraphQLError(await t.gql(CollectionAdd, { id: secret.id, creationIds: [c.id] }, bob.apiKey), 'NOT_FOUND');
    expectGraphQLError(await t.gql(CollectionUpdate, { id: open.id, input: { name: 'Mine' } }, bob.apiKey), 'FORBIDDEN');
    expectGraphQLError(await t.gql(CollectionDelete, { id: open.id }, bob.apiKey), 'FORBIDDEN');
    expectGraphQLError(await t.gql(CollectionRemove, { id: open.id, creationIds: [c.id] }, bob.apiKey), 'FORBIDDEN');
    expect((await read(alice, open.id)).name).toBe('Open');
    expect(ids(await read(alice, secret.id))).toEqual([c.id]);
  });

  it('the owner renames, fills, empties and deletes it; input errors name the field', async () => {
    const [a, b] = [await f.creation(alice), await f.creation(alice)];
    const made = await create(alice, { name: 'Draft', creationIds: [a.id] });
    expect(
      expectData(await t.gql(CollectionUpdate, { id: made.id, input: { description: 'Now described', public: false } }, alice.apiKey)),
    ).toEqual({
      updateCollection: { name: 'Draft', description: 'Now described', public: false },
    });
    const added = expectData(await t.gql(CollectionAdd, { id: made.id, creationIds: [b.id, a.id] }, alice.apiKey)).addCreationsToCollection;
    expect(added).toMatchObject({ creationCount: 2 });
    expect(added.creations.edges.map((e) => e.node.rawId)).toEqual([a.id, b.id]);
    const bad = expectGraphQLError(await t.gql(CollectionAdd, { id: made.id, creationIds: ['nope'] }, alice.apiKey), 'BAD_USER_INPUT');
    expect(bad.extensions?.field).toBe('creationIds.0');
    expectGraphQLError(await t.gql(CollectionUpdate, { id: made.id, input: { name: '' } }, alice.apiKey), 'BAD_USER_INPUT');
    expect(
      expectData(await t.gql(CollectionRemove, { id: made.id, creationIds: [a.id] }, alice.apiKey)).removeCreationsFromCollection,
    ).toEqual({
      creationCount: 1,
    });
    expect(expectData(await t.gql(CollectionDelete, { id: made.id }, alice.apiKey)).deleteCollection).toBe(true);
    expectGraphQLError(await t.gql(CollectionRead, { id: made.id }, alice.apiKey), 'NOT_FOUND');
  });

  it("Creator.collections lists someone's public ones (all on your own profile); Creation.collections those holding it that you may read", async () => {
    const carol = await t.createUser('carol');
    const c = await f.creation(carol);
    const hidden = await f.creation(carol, { public: false });
    await create(carol, { name: 'Carol public', creationIds: [hidden.id, c.id] });
    await create(carol, { name: 'Carol private', public: false, creationIds: [c.id] });
    await create(bob, { name: 'Bob likes it', creationIds: [c.id] });
    const seenByBob = expectData(await t.gql(CreatorCollections, { id: carol.id }, bob.apiKey)).creator;
    expect(seenByBob.balance).toBeNull();
    expect(seenByBob.collections.edges.map((e) => e.node)).toEqual([
      { name: 'Carol public', public: true, creationCount: 1, cover: { rawId: c.id } },
    ]);
    const seenByCarol = expectData(await t.gql(CreatorCollections, { id: carol.id }, carol.apiKey)).creator;
    expect(seenByCarol.collections.edges.map((e) => e.node.name)).toEqual(['Carol private', 'Carol public']);
    expect(seenByCarol.collections.edges[1]!.node).toMatchObject({ creationCount: 2, cover: { rawId: hidden.id } });

    const holding = async (user: TestUser, id: string) =>
      expectData(await t.gql(CreationCollections, { id }, user.apiKey))
        .creation.collections.edges.map((e) => e.node.name)
        .sort();
    expect(await holding(bob, c.id)).toEqual(['Bob likes it', 'Carol public']);
    expect(await holding(carol, c.id)).toEqual(['Bob likes it', 'Carol private', 'Carol public']);
    expect(await holding(carol, hidden.id)).toEqual(['Carol public']);
  });
});

describe('the SDK v2 changes over GraphQL', () => {
  let t: TestApp;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;
  let bob: TestUser;

  setUp(async (start) => {
    t = await start.app();
    f = fixtures(t);
    [alice, bob] = [await t.createUser('alice'), await t.createUser('bob')];
  });

  it("updateCreations and deleteCreations change the caller's creations, all or none; deleted ones leave their collections", async () => {
    const [a, b] = [await f.creation(alice), await f.creation(alice)];
    const bobs = await f.creation(bob);
    const changed = expectData(
      await t.gql(ChangeCreations, { ids: [a.id, b.id], input: { name: 'Renamed', public: false } }, alice.apiKey),
    );
    expect(changed.updateCreations).toEqual([
      { rawId: a.id, name: 'Renamed', public: false },
      { rawId: b.id, name: 'Renamed', public: false },
    ]);
    const refused = expectGraphQLError(
      await t.gql(ChangeCreations, { ids: [a.id, bobs.id], input: { public: true } }, alice.apiKey),
      'FORBIDDEN',
    );
    expect(refused.extensions?.field).toBe('creationIds.1');
    expect((await t.db.creation.findUniqueOrThrow({ where: { id: a.id } })).public).toBe(false);
    const collection = expectData(
      await t.gql(CollectionCreate, { input: { name: 'Soon empty', creationIds: [a.id, b.id] } }, alice.apiKey),
    );
    expect(expectData(await t.gql(DeleteCreations, { ids: [a.id] }, alice.apiKey)).deleteCreations).toBe(true);
    expect(await t.db.collectionCreation.findMany({ where: { collectionId: collection.createCollection.rawId } })).toHaveLength(1);
  });

  it('updateModel is the owner’s; deleteAgent removes an agent you own', async () => {
    const m = await f.model(alice, { public: false });
    expect(expectData(await t.gql(ChangeModel, { id: m.id, input: { name: 'Sharper', public: true } }, alice.apiKey)).updateModel).toEqual({
      rawId: m.id,
      name: 'Sharper',
      public: true,
    });
    expectGraphQLError(await t.gql(ChangeModel, { id: m.id, input: { public: false } }, bob.apiKey), 'FORBIDDEN');
    const agent = await f.agent(alice);
    expectGraphQLError(await t.gql(RemoveAgent, { id: agent.id }, bob.apiKey), 'FORBIDDEN');
    expect(expectData(await t.gql(RemoveAgent, { id: agent.id }, alice.apiKey)).deleteAgent).toBe(true);
    expect(await t.db.agent.findUnique({ where: { id: agent.id } })).toBeNull();
  });
});
