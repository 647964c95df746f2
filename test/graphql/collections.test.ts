import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser, GraphQLResponse } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';

/**
 * Collections on the wire: GraphQL, its statement counts, then REST and its bounds (the rules:
 * test/rules/collections.test.ts). One file for the domain's transports; each part starts its own
 * app, as their fixtures name the same users and the bounds need their own limits.
 */

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

const CollectionsWithEverything = graphql(`
  query CollectionsWithEverything {
    me {
      collections(first: 20) {
        edges {
          node {
            name
            creationCount
            owner { username }
            cover { name creator { username } }
            creations(first: 3) { edges { node { name creator { username } agent { key } } } }
          }
        }
      }
    }
  }
`);

const CreationsWithCollections = graphql(`
  query CreationsWithCollections {
    me { creations(first: 50) { edges { node { name collections(first: 2) { edges { node { name owner { username } } } } } } } }
  }
`);

/**
 * The new lists over GraphQL cost a fixed number of SQL statements however many rows they hold:
 * a collection's count, cover and page of creations are planned into the statement that reads the
 * collections, not read one collection at a time.
 */
describe('collections in GraphQL lists: no statement per row', () => {
  let t: TestApp;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;

  setUp(async (start) => {
    t = await start.app();
    f = fixtures(t);
    alice = await t.createUser('alice');
  });

  async function statementsFor<R>(document: TypedDocumentNode<R, Record<string, never>>, user = alice) {
    let result: GraphQLResponse<R> | undefined;
    const count = await t.countQueries(async () => {
      result = await t.gql(document, {}, user.apiKey);
    });
    expect(result!.errors).toBeUndefined();
    return { count, data: result!.data! };
  }

  /** `n` collections of alice's, each with three creations (one private), made by an agent. */
  async function collections(n: number) {
    const agent = await f.agent(alice);
    for (let i = 0; i < n; i++) {
      const creations = [
        await f.creation(alice, { agentId: agent.id }),
        await f.creation(alice, { public: false, agentId: agent.id }),
        await f.creation(alice),
      ];
      await t.services.collections.create({ id: alice.id }, { name: `C${i}`, creationIds: creations.map((c) => c.id) });
    }
  }

  it('me { collections { creationCount cover creations { creator agent } } }: 20 collections cost what 2 do', async () => {
    await collections(2);
    const small = await statementsFor(CollectionsWithEverything);
    expect(small.data.me.collections.edges).toHaveLength(2);
    await collections(18);
    const large = await statementsFor(CollectionsWithEverything);
    expect(large.data.me.collections.edges).toHaveLength(20);
    for (const { node } of large.data.me.collections.edges) {
      expect(node.creationCount).toBe(3);
      expect(node.creations.edges).toHaveLength(3);
      expect(node.cover?.creator.username).toBe('alice');
    }
    expect(large.count).toBe(small.count);
    // The key, then the profile with its collections, counts, covers and pages joined in.
    expect(large.count).toBeLessThanOrEqual(4);
  });

  it('me { creations { collections { owner } } }: 50 creations cost what 5 do', async () => {
    const bob = await t.createUser('bob');
    const carol = await t.createUser('carol');
    const add = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const c = await f.creation(carol);
        await t.services.collections.create({ id: bob.id }, { name: `Bob's ${i}`, creationIds: [c.id] });
      }
    };
    await add(5);
    const small = await statementsFor(CreationsWithCollections, carol);
    expect(small.data.me.creations.edges).toHaveLength(5);
    await add(45);
    const large = await statementsFor(CreationsWithCollections, carol);
    expect(large.data.me.creations.edges.length).toBe(50);
    expect(large.data.me.creations.edges.filter((e) => e.node.collections.edges[0]?.node.owner.username === 'bob')).toHaveLength(50);
    expect(large.count).toBe(small.count);
    expect(large.count).toBeLessThanOrEqual(3);
  });
});

/**
 * Collections over REST, as their users would check them: who reads, who changes, what a reader
 * is shown inside (never a private creation of someone else, not even as a count or a cover), and
 * the bounds, each refusal changing nothing.
 */
describe('collections over REST', () => {
  let t: TestApp;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;
  let bob: TestUser;
  let carol: TestUser;

  setUp(async (start) => {
    t = await start.app();
    f = fixtures(t);
    [alice, bob, carol] = [await t.createUser('alice'), await t.createUser('bob'), await t.createUser('carol')];
  });

  const create = async (user: TestUser, body: Record<string, unknown>) => {
    const res = await t.rest('POST', '/v2/collections', { key: user.apiKey, body });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.collectionId as string;
  };
  const read = (user: TestUser, id: string) => t.rest('GET', `/v2/collections/${id}`, { key: user.apiKey });
  /** What a user is shown of a collection: the creations (in order), the count and the cover. */
  const shown = async (user: TestUser, id: string) => {
    const res = await read(user, id);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const page = await t.rest('GET', `/v2/collections/${id}/creations?limit=100`, { key: user.apiKey });
    expect(page.body.docs.map((c: { _id: string }) => c._id)).toEqual(res.body.collection.creations.map((c: { _id: string }) => c._id));
    expect(page.body.total).toBe(res.body.collection.creationCount);
    return {
      ids: res.body.collection.creations.map((c: { _id: string }) => c._id) as string[],
      count: res.body.collection.creationCount as number,
      cover: (res.body.collection.coverCreation?._id ?? null) as string | null,
    };
  };
  const items = (collectionId: string) =>
    t.db.collectionCreation.findMany({ where: { collectionId }, orderBy: { id: 'asc' } }).then((rows) => rows.map((r) => r.creationId));

  it('shows each reader only the creations both they and the owner may see: counts and covers never reveal a private one', async () => {
    const alicePrivate = await f.creation(alice, { public: false });
    const alicePublic = await f.creation(alice);
    const bobPublic = await f.creation(bob);
    const id = await create(alice, { name: 'Mixed', creationIds: [alicePrivate.id, alicePublic.id, bobPublic.id] });

    expect(await shown(alice, id)).toEqual({ ids: [alicePrivate.id, alicePublic.id, bobPublic.id], count: 3, cover: alicePrivate.id });
    for (const stranger of [bob, carol]) {
      expect(await shown(stranger, id)).toEqual({ ids: [alicePublic.id, bobPublic.id], count: 2, cover: alicePublic.id });
    }
    // The light list is the owner's own view.
    const light = await t.rest('GET', '/v2/collections/light', { key: alice.apiKey });
    expect(light.body.collections.find((c: { _id: string }) => c._id === id).creations).toEqual([
      alicePrivate.id,
      alicePublic.id,
      bobPublic.id,
    ]);

    // Bob makes his creation private: alice may no longer see it, so her collection shows it to no one.
    expect((await t.rest('PATCH', `/v2/creations/${bobPublic.id}`, { key: bob.apiKey, body: { public: false } })).status).toBe(200);
    expect(await shown(alice, id)).toMatchObject({ ids: [alicePrivate.id, alicePublic.id], count: 2 });
    expect(await shown(bob, id)).toEqual({ ids: [alicePublic.id], count: 1, cover: alicePublic.id });
    // Public again: it is back in its place.
    await t.rest('PATCH', `/v2/creations/${bobPublic.id}`, { key: bob.apiKey, body: { public: true } });
    expect((await shown(carol, id)).ids).toEqual([alicePublic.id, bobPublic.id]);
  });

  it("holds only creations its owner may see: someone else's private one, or an unknown id, is refused by its place and nothing changes", async () => {
    const mine = await f.creation(alice);
    const bobPrivate = await f.creation(bob, { public: false });
    const deleted = await f.creation(bob, { deleted: true });
    const before = await t.db.collection.count();
    const refused = await t.rest('POST', '/v2/collections', {
      key: alice.apiKey,
      body: { name: 'Nope', creationIds: [mine.id, bobPrivate.id] },
    });
    expect(refused).toMatchObject({ status: 400, body: { error: 'creationIds[1]: creation not found or you do not have access to it' } });
    expect(await t.db.collection.count()).toBe(before);

    const id = await create(alice, { name: 'Mine', creationIds: [mine.id] });
    for (const other of [bobPrivate.id, deleted.id, 'no-such-creation']) {
      const res = await t.rest('PATCH', `/v2/collections/${id}/creations/add`, { key: alice.apiKey, body: { creationIds: [other] } });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatch(/^creationIds\[0\]: /);
    }
    expect(await items(id)).toEqual([mine.id]);
  });

  it('keeps a creation once however often it is added, and removing one that is not in changes nothing', async () => {
    const [a, b] = [await f.creation(alice), await f.creation(alice)];
    const id = await create(alice, { name: 'Twice', creationIds: [a.id, a.id] });
    expect(await items(id)).toEqual([a.id]);
    const added = await t.rest('PATCH', `/v2/collections/${id}/creations/add`, {
      key: alice.apiKey,
      body: { creationIds: [a.id, b.id, b.id] },
    });
    expect(added.body).toEqual({ collectionId: id, creationCount: 2, added: 1 });
    const again = await t.rest('PATCH', `/v2/collections/${id}/creations/add`, { key: alice.apiKey, body: { creationIds: [b.id] } });
    expect(again.body).toMatchObject({ added: 0, creationCount: 2 });
    const removed = await t.rest('PATCH', `/v2/collections/${id}/creations/remove`, {
      key: alice.apiKey,
      body: { creationIds: [b.id, 'x'] },
    });
    expect(removed.body).toEqual({ collectionId: id, creationCount: 1, removed: 1 });
    const none = await t.rest('PATCH', `/v2/collections/${id}/creations/remove`, { key: alice.apiKey, body: { creationIds: [b.id] } });
    expect(none.body).toMatchObject({ removed: 0, creationCount: 1 });
    expect(await items(id)).toEqual([a.id]);
  });

  it('a deleted creation leaves every collection, whoever owns them', async () => {
    const doomed = await f.creation(alice);
    const kept = await f.creation(alice);
    const hers = await create(alice, { name: 'Hers', creationIds: [doomed.id, kept.id] });
    const his = await create(bob, { name: 'His', creationIds: [doomed.id] });
    const res = await t.rest('PATCH', `/v2/creations/${doomed.id}`, { key: alice.apiKey, body: { deleted: true } });
    expect(res).toMatchObject({ status: 200, body: { creation: { _id: doomed.id, deleted: true } } });
    expect(await items(hers)).toEqual([kept.id]);
    expect(await items(his)).toEqual([]);
    expect(await shown(bob, his)).toEqual({ ids: [], count: 0, cover: null });
    expect(await t.db.collectionCreation.count({ where: { creationId: doomed.id } })).toBe(0);
  });

  it("someone else's private collection is not there; their public one can be read, not changed; refusals change nothing", async () => {
    const c = await f.creation(alice);
    const privateId = await create(alice, { name: 'Secret', public: false, creationIds: [c.id] });
    const publicId = await create(alice, { name: 'Open', creationIds: [c.id] });
    const unknown = await read(bob, 'no-such-collection');
    expect(unknown).toMatchObject({ status: 404, body: { error: 'Collection not found', message: 'Collection not found' } });
    const attempts = (id: string) =>
      [
        ['GET', `/v2/collections/${id}`],
        ['GET', `/v2/collections/${id}/creations`],
        ['PATCH', `/v2/collections/${id}`, { name: 'Mine now' }],
        ['PATCH', `/v2/collections/${id}/creations/add`, { creationIds: [c.id] }],
        ['PATCH', `/v2/collections/${id}/creations/remove`, { creationIds: [c.id] }],
        ['DELETE', `/v2/collections/${id}`],
      ] as const;
    for (const [method, path, body] of attempts(privateId)) {
      const res = await t.rest(method, path, { key: bob.apiKey, body });
      expect({ status: res.status, body: res.body }, `${method} ${path}`).toEqual({ status: unknown.status, body: unknown.body });
    }
    expect((await read(bob, publicId)).status).toBe(200);
    for (const [method, path, body] of attempts(publicId).slice(2)) {
      const res = await t.rest(method, path, { key: bob.apiKey, body });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.error).toBe('Only the owner of this collection can change it');
    }
    expect(await t.db.collection.findMany({ where: { userId: alice.id, name: { in: ['Secret', 'Open'] } } })).toHaveLength(2);
    expect(await items(privateId)).toEqual([c.id]);
    expect(await items(publicId)).toEqual([c.id]);
  });

  it('the owner renames, describes and hides a collection; only the fields sent change; bad input names the field', async () => {
    const id = await create(alice, { name: 'Draft', description: 'First go' });
    const res = await t.rest('PATCH', `/v2/collections/${id}`, { key: alice.apiKey, body: { public: false } });
    expect(res.body.collection).toMatchObject({ name: 'Draft', description: 'First go', public: false });
    // Which changes are refused is the collections' rule (test/rules/collections.test.ts); here, the 400 {error} naming the field.
    for (const [body, field] of [[{ name: 'x'.repeat(101) }, 'name']] as const) {
      const bad = await t.rest('PATCH', `/v2/collections/${id}`, { key: alice.apiKey, body });
      expect(bad.status).toBe(400);
      expect(bad.body.error).toMatch(new RegExp(`^${field}: `));
    }
    const empty = await t.rest('PATCH', `/v2/collections/${id}`, { key: alice.apiKey, body: { colour: 'blue' } });
    expect(empty).toMatchObject({ status: 400, body: { error: 'No collection fields to update in the request' } });
    expect(await t.db.collection.findUniqueOrThrow({ where: { id } })).toMatchObject({
      name: 'Draft',
      description: 'First go',
      public: false,
    });
  });
});

describe('collection bounds over REST', () => {
  let t: TestApp;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;
  const PAGE_BYTES = 8_000;

  setUp(async (start) => {
    t = await start.app({
      collections: { maxCreations: 3, maxPerUser: 2, pageMaxBytes: PAGE_BYTES },
      limits: { rate: { perTier: { tiny: 4 } } },
    });
    f = fixtures(t);
    alice = await t.createUser('alice');
  });

  it('holds at most COLLECTION_MAX_CREATIONS, also when adds race; past it nothing is added', async () => {
    const creations = await Promise.all(Array.from({ length: 6 }, () => f.creation(alice)));
    const made = await t.rest('POST', '/v2/collections', { key: alice.apiKey, body: { name: 'Small' } });
    const id = made.body.collectionId;
    const tries = await Promise.all(
      creations.map((c) => t.rest('PATCH', `/v2/collections/${id}/creations/add`, { key: alice.apiKey, body: { creationIds: [c.id] } })),
    );
    expect(tries.filter((r) => r.status === 200)).toHaveLength(3);
    for (const refused of tries.filter((r) => r.status !== 200)) {
      expect(refused).toMatchObject({ status: 400, body: { error: 'creationIds: a collection holds at most 3 creations' } });
    }
    expect(await t.db.collectionCreation.count({ where: { collectionId: id } })).toBe(3);
    const tooMany = await t.rest('POST', '/v2/collections', {
      key: alice.apiKey,
      body: { name: 'Four', creationIds: creations.slice(0, 4).map((c) => c.id) },
    });
    expect(tooMany.status).toBe(400);
    await t.db.collection.delete({ where: { id } });
  });

  it('a user owns at most MAX_COLLECTIONS_PER_USER, also when creations race', async () => {
    const bob = await t.createUser('bob');
    const tries = await Promise.all(
      Array.from({ length: 5 }, (_, i) => t.rest('POST', '/v2/collections', { key: bob.apiKey, body: { name: `No. ${i}` } })),
    );
    expect(tries.filter((r) => r.status === 201)).toHaveLength(2);
    for (const refused of tries.filter((r) => r.status !== 201)) {
      expect(refused).toMatchObject({ status: 422, body: { error: 'Collection limit reached: a user may own at most 2 collections' } });
    }
    expect(await t.db.collection.count({ where: { userId: bob.id } })).toBe(2);
  });

  it('pages stop before their byte budget whatever the limit; the cursor walks every creation once, in order', async () => {
    const carol = await t.createUser('carol');
    const big = await Promise.all(
      Array.from({ length: 3 }, (_, i) =>
        t.db.creation.create({
          data: {
            userId: carol.id,
            tool: 'flux_dev',
            name: `Big ${i}`,
            url: 'https://cdn.example.com/big.png',
            public: true,
            args: { prompt: `${i}`.padEnd(2_000, 'x') },
          },
        }),
      ),
    );
    const made = await t.rest('POST', '/v2/collections', { key: carol.apiKey, body: { name: 'Heavy', creationIds: big.map((c) => c.id) } });
    const id = made.body.collectionId;
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    for (let reads = 0; reads < 10; reads++) {
      pages++;
      const res = await fetch(`${t.url}/v2/collections/${id}/creations?limit=100${cursor ? `&cursor=${cursor}` : ''}`, {
        headers: { 'x-api-key': carol.apiKey },
      });
      const text = await res.text();
      const body = JSON.parse(text);
      expect(res.status).toBe(200);
      // Each creation carries its arguments twice (its own and its task's): about 5 KB here.
      expect(body.docs.length).toBeGreaterThanOrEqual(1);
      expect(body.docs.length === 1 || text.length <= PAGE_BYTES).toBe(true);
      expect(body.total).toBe(3);
      seen.push(...body.docs.map((d: { _id: string }) => d._id));
      cursor = body.nextCursor;
      expect(body.hasNextPage).toBe(cursor !== null);
      if (!cursor) break;
    }
    expect(seen).toEqual(big.map((c) => c.id));
    // Three of them do not fit one page of the budget, though the limit would take them all.
    expect(pages).toBeGreaterThan(1);
    const bad = await t.rest('GET', `/v2/collections/${id}/creations?cursor=not-a-cursor`, { key: carol.apiKey });
    expect(bad).toMatchObject({ status: 400, body: { error: 'Invalid cursor' } });
    const wrongLimit = await t.rest('GET', `/v2/collections/${id}/creations?limit=101`, { key: carol.apiKey });
    expect(wrongLimit).toMatchObject({ status: 400, body: { error: 'limit: must be at most 100' } });
  });

  it('are rate-limited like every route: over the limit, 429 in the collections body with Retry-After, and nothing is made', async () => {
    const dave = await t.createUser('dave');
    await t.db.user.update({ where: { id: dave.id }, data: { subscriptionTier: 'tiny' } });
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await t.rest('POST', '/v2/collections', { key: dave.apiKey, body: { name: `Try ${i}` } }));
    const limited = answers.filter((r) => r.status === 429);
    expect(limited.length).toBeGreaterThan(0);
    expect(Object.keys(limited[0]!.body).sort()).toEqual(['error', 'message']);
    expect(Number(limited[0]!.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await t.db.collection.count({ where: { userId: dave.id } })).toBe(answers.filter((r) => r.status === 201).length);
  });
});
