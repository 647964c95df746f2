import { describe, expect, it, beforeAll } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';
import { expectError, expectRejectsBadKeys } from '../helpers/rest-helpers.ts';

/**
 * Creations on the wire, GraphQL then REST likes (the rules: test/rules/creations.test.ts). One
 * file for the domain's transports, over one app: each test reads and likes creations of its own.
 */

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

describe('creations over GraphQL', () => {
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
});

const NOT_VISIBLE = 'Creation not found or you do not have access to it';

describe('REST creation likes', () => {
  const like = (id: string, user: TestUser) => t.rest('POST', `/v2/creations/${id}/like`, { key: user.apiKey });
  const unlike = (id: string, user: TestUser) => t.rest('DELETE', `/v2/creations/${id}/like`, { key: user.apiKey });
  /** likeCount and the Like rows of a creation, read from the database. */
  const state = async (id: string) => {
    const creation = await t.db.creation.findUniqueOrThrow({ where: { id } });
    const likes = await t.db.like.findMany({ where: { creationId: id }, orderBy: { userId: 'asc' } });
    return { likeCount: creation.likeCount, rows: likes.length, users: likes.map((l) => l.userId).sort() };
  };

  describe('auth', () => {
    it.each(['POST', 'DELETE'])(
      '%s /v2/creations/{id}/like answers 401 {error} for missing, malformed and unknown keys',
      async (method) => {
        const creation = await f.creation(alice, { public: true });
        if (method === 'DELETE') expect((await like(creation.id, bob)).status).toBe(200);
        const before = await state(creation.id);
        expect(await expectRejectsBadKeys(t, method, `/v2/creations/${creation.id}/like`)).toBe(true);
        expect(await state(creation.id)).toEqual(before);
      },
    );
  });

  describe('POST /v2/creations/{id}/like', () => {
    it("likes another user's public creation: 200 and likeCount 1", async () => {
      const creation = await f.creation(alice, { public: true });
      const res = await like(creation.id, bob);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ message: 'Creation liked successfully' });
      expect(await state(creation.id)).toEqual({ likeCount: 1, rows: 1, users: [bob.id] });
    });

    it('likes my own private creation', async () => {
      const creation = await f.creation(alice, { public: false });
      expect((await like(creation.id, alice)).body).toEqual({ message: 'Creation liked successfully' });
      expect(await state(creation.id)).toEqual({ likeCount: 1, rows: 1, users: [alice.id] });
    });

    it('refuses a second like with 400 {message:"Creation already liked by user"}; the count stays 1', async () => {
      const creation = await f.creation(alice, { public: true });
      expect((await like(creation.id, bob)).status).toBe(200);
      expectError(await like(creation.id, bob), 400, 'message', 'Creation already liked by user');
      expect(await state(creation.id)).toEqual({ likeCount: 1, rows: 1, users: [bob.id] });
    });

    it("answers 404 for an unknown, another user's private, or a deleted creation, and records nothing", async () => {
      const privateOfAlice = await f.creation(alice, { public: false });
      const deletedPublic = await f.creation(alice, { public: true, deleted: true });
      const deletedOwn = await f.creation(bob, { public: false, deleted: true });
      for (const id of [privateOfAlice.id, deletedPublic.id, deletedOwn.id]) {
        expectError(await like(id, bob), 404, 'message', NOT_VISIBLE);
        expect(await state(id)).toEqual({ likeCount: 0, rows: 0, users: [] });
      }
      for (const id of ['nope', '5f1e2d3c4b5a697887766554', '01890a5d-ac96-774b-bcce-b302099a8057']) {
        expectError(await like(id, bob), 404, 'message', NOT_VISIBLE);
      }
      expect(
        await t.db.like.count({ where: { userId: bob.id, creationId: { in: [privateOfAlice.id, deletedPublic.id, deletedOwn.id] } } }),
      ).toBe(0);
    });

    it('answers 404, not 500, for an id containing a NUL byte', async () => {
      expectError(await like('a%00b', bob), 404, 'message', NOT_VISIBLE);
      expectError(await unlike('a%00b', bob), 404, 'message', NOT_VISIBLE);
    });
  });

  describe('DELETE /v2/creations/{id}/like', () => {
    it('unlikes: 200, likeCount back to 0 and the like row gone; a second unlike is 404 "Like not found"', async () => {
      const creation = await f.creation(alice, { public: true });
      expect((await like(creation.id, bob)).status).toBe(200);
      expect((await like(creation.id, alice)).status).toBe(200);
      const res = await unlike(creation.id, bob);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ message: 'Creation unliked successfully' });
      expect(await state(creation.id)).toEqual({ likeCount: 1, rows: 1, users: [alice.id] });
      expectError(await unlike(creation.id, bob), 404, 'message', 'Like not found');
      expect(await state(creation.id)).toEqual({ likeCount: 1, rows: 1, users: [alice.id] });
      // Liking again after an unlike works.
      expect((await like(creation.id, bob)).status).toBe(200);
      expect(await state(creation.id)).toEqual({ likeCount: 2, rows: 2, users: [alice.id, bob.id].sort() });
    });

    it('answers 404 {message:"Like not found"} for a visible creation I never liked', async () => {
      const creation = await f.creation(alice, { public: true });
      expect((await like(creation.id, alice)).status).toBe(200);
      expectError(await unlike(creation.id, bob), 404, 'message', 'Like not found');
      expect(await state(creation.id)).toEqual({ likeCount: 1, rows: 1, users: [alice.id] });
    });

    it('answers 404 "Creation not found..." for an unknown, invisible or deleted creation', async () => {
      const privateOfAlice = await f.creation(alice, { public: false });
      expect((await like(privateOfAlice.id, alice)).status).toBe(200);
      expectError(await unlike(privateOfAlice.id, bob), 404, 'message', NOT_VISIBLE);
      expect(await state(privateOfAlice.id)).toEqual({ likeCount: 1, rows: 1, users: [alice.id] });
      const deleted = await f.creation(alice, { public: true, deleted: true });
      expectError(await unlike(deleted.id, bob), 404, 'message', NOT_VISIBLE);
      expectError(await unlike('nope', bob), 404, 'message', NOT_VISIBLE);
    });
  });

  describe('concurrency', () => {
    let users: TestUser[];

    beforeAll(async () => {
      users = [];
      for (let i = 0; i < 50; i++) users.push(await t.createUser(`liker${i}`));
    });

    it('50 users liking one creation at once: all 200, likeCount = 50 = Like rows', async () => {
      const creation = await f.creation(alice, { public: true });
      const results = await Promise.all(users.map((u) => like(creation.id, u)));
      expect(results.map((r) => r.status)).toEqual(users.map(() => 200));
      expect(results.every((r) => r.body.message === 'Creation liked successfully')).toBe(true);
      expect(await state(creation.id)).toEqual({ likeCount: 50, rows: 50, users: users.map((u) => u.id).sort() });
    });

    it('a mixed burst of likes and unlikes (some doubled) leaves likeCount equal to the Like rows', async () => {
      const creation = await f.creation(alice, { public: true });
      // Users 0-24 like it first.
      for (const u of users.slice(0, 25)) expect((await like(creation.id, u)).status).toBe(200);

      const requests: { user: number; op: 'like' | 'unlike' }[] = [
        ...users.slice(0, 10).map((_, i) => ({ user: i, op: 'unlike' as const })), // 10 unlikes
        ...[10, 11, 12, 13, 14].flatMap((i) => [
          { user: i, op: 'unlike' as const },
          { user: i, op: 'unlike' as const },
        ]), // 5 double unlikes
        ...[15, 16, 17, 18, 19].map((i) => ({ user: i, op: 'like' as const })), // 5 likes of something already liked
        ...Array.from({ length: 15 }, (_, k) => ({ user: 25 + k, op: 'like' as const })), // 15 new likes
        ...[40, 41, 42, 43, 44].flatMap((i) => [
          { user: i, op: 'like' as const },
          { user: i, op: 'like' as const },
        ]), // 5 double likes
      ];
      expect(requests).toHaveLength(50);
      const results = await Promise.all(requests.map((r) => (r.op === 'like' ? like : unlike)(creation.id, users[r.user]!)));
      const byUser = new Map<number, number[]>();
      requests.forEach((r, i) => byUser.set(r.user, [...(byUser.get(r.user) ?? []), results[i]!.status]));

      for (let i = 0; i < 10; i++) expect(byUser.get(i)).toEqual([200]);
      for (const i of [10, 11, 12, 13, 14]) expect(byUser.get(i)!.sort()).toEqual([200, 404]);
      for (const i of [15, 16, 17, 18, 19]) expect(byUser.get(i)).toEqual([400]);
      for (let i = 25; i < 40; i++) expect(byUser.get(i)).toEqual([200]);
      for (const i of [40, 41, 42, 43, 44]) expect(byUser.get(i)!.sort()).toEqual([200, 400]);
      expect(results.every((r) => r.status !== 500)).toBe(true);

      const expectedLikers = [...users.slice(15, 25), ...users.slice(25, 45)].map((u) => u.id).sort();
      expect(await state(creation.id)).toEqual({ likeCount: 30, rows: 30, users: expectedLikers });
    });

    it('a burst of like/unlike pairs by the same users ends with likeCount = Like rows', async () => {
      const creation = await f.creation(alice, { public: true });
      const burst = users.slice(0, 25).flatMap((u) => [like(creation.id, u), unlike(creation.id, u)]);
      const results = await Promise.all(burst);
      expect(results.every((r) => [200, 404].includes(r.status))).toBe(true);
      const s = await state(creation.id);
      expect(s.likeCount).toBe(s.rows);
      // Each user's like succeeded; the unlike succeeded exactly when it ran after the like.
      const likesOk = results.filter((_, i) => i % 2 === 0).every((r) => r.status === 200);
      expect(likesOk).toBe(true);
      const unlikesOk = results.filter((_, i) => i % 2 === 1 && results[i]!.status === 200).length;
      expect(s.rows).toBe(25 - unlikesOk);
    });
  });
});
