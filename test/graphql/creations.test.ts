import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';

const CreationsGet = graphql(`
  query CreationsGet($id: ID!) {
    creation(id: $id) { rawId name url args public toolKey likeCount likedByMe creator { rawId username } agent { rawId key } createdAt }
  }
`);
const CreationsLike = graphql(`
  mutation CreationsLike($id: ID!) {
    likeCreation(id: $id) { rawId likeCount likedByMe }
  }
`);
const CreationsUnlike = graphql(`
  mutation CreationsUnlike($id: ID!) {
    unlikeCreation(id: $id) { rawId likeCount likedByMe }
  }
`);
const CreationsMine = graphql(`
  query CreationsMine {
    me { creations(first: 50) { edges { node { rawId public creator { username } } } } }
  }
`);
const CreationsOfCreator = graphql(`
  query CreationsOfCreator($id: ID!) {
    creation(id: $id) {
      creator { username creations(first: 50) { edges { node { rawId public } } } }
    }
  }
`);

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
let f: ReturnType<typeof fixtures>;

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  f = fixtures(t);
});

const read = async (id: string, key: string) => expectData(await t.gql(CreationsGet, { id }, key)).creation;

describe('creation(id)', () => {
  it('a public creation is visible to anyone, with its creator and agent', async () => {
    const agent = await f.agent(alice, { key: 'alice-artist' });
    const creation = await f.creation(alice, { public: true, agentId: agent.id });
    expect(await read(creation.id, bob.apiKey)).toMatchObject({
      rawId: creation.id,
      name: creation.name,
      url: 'https://cdn.example.com/c.png',
      args: { prompt: 'a lighthouse' },
      public: true,
      toolKey: 'flux_dev',
      likeCount: 0,
      likedByMe: false,
      creator: { rawId: alice.id, username: 'alice' },
      agent: { rawId: agent.id, key: 'alice-artist' },
    });
  });

  it("another user's private creation is NOT_FOUND (its existence is not revealed)", async () => {
    const creation = await f.creation(alice, { public: false });
    const response = await t.gql(CreationsGet, { id: creation.id }, bob.apiKey);
    expect(response.data).toBeNull();
    expect(expectGraphQLError(response, 'NOT_FOUND').path).toEqual(['creation']);
    expect(JSON.stringify(response)).not.toContain(creation.name);
  });

  it('a deleted creation is NOT_FOUND, even for its creator', async () => {
    const creation = await f.creation(alice, { public: true, deleted: true });
    expectGraphQLError(await t.gql(CreationsGet, { id: creation.id }, alice.apiKey), 'NOT_FOUND');
    expectGraphQLError(await t.gql(CreationsGet, { id: creation.id }, bob.apiKey), 'NOT_FOUND');
  });

  it('an unknown id is NOT_FOUND', async () => {
    expectGraphQLError(await t.gql(CreationsGet, { id: 'no-such-creation' }, alice.apiKey), 'NOT_FOUND');
  });
});

// Who sees a creation, and that a like counts once, are the creations' rules (test/rules/creations.test.ts);
// here, how GraphQL answers them: the fields, the codes, what a private one does not show.
describe('likeCreation and unlikeCreation', () => {
  it('like returns the creation with likeCount 1 and likedByMe true; others see the count', async () => {
    const creation = await f.creation(alice, { public: true });
    const liked = expectData(await t.gql(CreationsLike, { id: creation.id }, bob.apiKey)).likeCreation;
    expect(liked).toEqual({ rawId: creation.id, likeCount: 1, likedByMe: true });

    expect(await read(creation.id, bob.apiKey)).toMatchObject({ likeCount: 1, likedByMe: true });
    expect(await read(creation.id, alice.apiKey)).toMatchObject({ likeCount: 1, likedByMe: false });
  });

  it('liking twice is BAD_USER_INPUT, and the count stays 1', async () => {
    const creation = await f.creation(alice, { public: true });
    expectData(await t.gql(CreationsLike, { id: creation.id }, bob.apiKey));
    const again = await t.gql(CreationsLike, { id: creation.id }, bob.apiKey);
    expect(again.data).toBeNull();
    expect(expectGraphQLError(again, 'BAD_USER_INPUT').message).toMatch(/already liked/i);
    expect(await read(creation.id, bob.apiKey)).toMatchObject({ likeCount: 1, likedByMe: true });
  });

  it('two users liking count 2; unlike returns likeCount and likedByMe for the caller', async () => {
    const creation = await f.creation(alice, { public: true });
    expectData(await t.gql(CreationsLike, { id: creation.id }, bob.apiKey));
    expect(expectData(await t.gql(CreationsLike, { id: creation.id }, alice.apiKey)).likeCreation).toMatchObject({
      likeCount: 2,
      likedByMe: true,
    });

    const unliked = expectData(await t.gql(CreationsUnlike, { id: creation.id }, bob.apiKey)).unlikeCreation;
    expect(unliked).toEqual({ rawId: creation.id, likeCount: 1, likedByMe: false });
    expect(await read(creation.id, alice.apiKey)).toMatchObject({ likeCount: 1, likedByMe: true });
  });

  it('unlike without a like is NOT_FOUND, and the count is unchanged', async () => {
    const creation = await f.creation(alice, { public: true });
    expectData(await t.gql(CreationsLike, { id: creation.id }, alice.apiKey));
    const response = await t.gql(CreationsUnlike, { id: creation.id }, bob.apiKey);
    expect(response.data).toBeNull();
    expect(expectGraphQLError(response, 'NOT_FOUND').message).toMatch(/like not found/i);
    expect(await read(creation.id, alice.apiKey)).toMatchObject({ likeCount: 1, likedByMe: true });
  });

  it("liking or unliking another user's private creation is NOT_FOUND, and no like is recorded", async () => {
    const creation = await f.creation(alice, { public: false });
    expectGraphQLError(await t.gql(CreationsLike, { id: creation.id }, bob.apiKey), 'NOT_FOUND');
    expectGraphQLError(await t.gql(CreationsUnlike, { id: creation.id }, bob.apiKey), 'NOT_FOUND');
    expect(await read(creation.id, alice.apiKey)).toMatchObject({ likeCount: 0, likedByMe: false });
    expect(await t.db.like.count({ where: { creationId: creation.id } })).toBe(0);
  });
});

describe('creations connections', () => {
  it('me { creations } lists your own public and private creations, not deleted ones', async () => {
    const carol = await t.createUser('carol');
    const pub = await f.creation(carol, { public: true });
    const priv = await f.creation(carol, { public: false });
    await f.creation(carol, { public: true, deleted: true });
    await f.creation(alice, { public: true });

    const edges = expectData(await t.gql(CreationsMine, {}, carol.apiKey)).me.creations.edges;
    expect(edges.map((e) => e.node.rawId).sort()).toEqual([pub.id, priv.id].sort());
    expect(edges.every((e) => e.node.creator.username === 'carol')).toBe(true);
  });

  it("another creator's creations show only the public ones", async () => {
    const dave = await t.createUser('dave');
    const pub1 = await f.creation(dave, { public: true });
    const pub2 = await f.creation(dave, { public: true });
    await f.creation(dave, { public: false });
    await f.creation(dave, { public: false });

    const seenByBob = expectData(await t.gql(CreationsOfCreator, { id: pub1.id }, bob.apiKey)).creation.creator;
    expect(seenByBob.username).toBe('dave');
    expect(seenByBob.creations.edges.map((e) => e.node.rawId).sort()).toEqual([pub1.id, pub2.id].sort());
    expect(seenByBob.creations.edges.every((e) => e.node.public)).toBe(true);

    // Dave, through the same path, sees all four.
    const seenByDave = expectData(await t.gql(CreationsOfCreator, { id: pub1.id }, dave.apiKey)).creation.creator;
    expect(seenByDave.creations.edges).toHaveLength(4);
  });
});
