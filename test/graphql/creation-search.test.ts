import { describe, expect, it, beforeAll } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { searchableCreation, searchPath } from '../search/support.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';
import { expectError, expectRejectsBadKeys, isoDate, viewerOf, expectNoInternals } from '../helpers/rest-helpers.ts';
import { loadDemo, type DemoManifest } from '../../src/demo/load.ts';
import { defaultSearchConfig } from '../../src/config.ts';
import { hashedNgramsProvider } from '../../src/domain/search/embeddings/hashed-ngrams.ts';
import { searchService } from '../../src/domain/search/service.ts';
import { searchStore } from '../../src/domain/search/store.ts';
import { axis, startFakeEmbeddings, type FakeEmbeddings } from '../helpers/fake-embeddings.ts';

/**
 * Creation search on the wire: GraphQL, REST, the demo data, and an embedding server over HTTP
 * (the rules: test/rules/search.test.ts). One file for the search's transports; each part starts
 * its own app, as each needs its own data or provider.
 */

const SearchPage = graphql(`
  query SearchPage($query: String!, $filter: CreationSearchFilter, $page: Int, $limit: Int, $orderBy: CreationSearchOrder, $direction: SortDirection) {
    searchCreations(query: $query, filter: $filter, page: $page, limit: $limit, orderBy: $orderBy, direction: $direction) {
      total limit page pages pagingCounter hasPrevPage hasNextPage prevPage nextPage
      docs { rawId name score likeCount likedByMe public creator { username } agent { key owner { username } } }
    }
  }
`);

const SearchFeed = graphql(`
  query SearchFeed($query: String!, $first: Int, $after: String, $orderBy: CreationSearchOrder, $direction: SortDirection) {
    searchCreationsConnection(query: $query, first: $first, after: $after, orderBy: $orderBy, direction: $direction) {
      totalCount
      edges { cursor node { rawId name score } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
`);

const SearchFeedBackwards = graphql(`
  query SearchFeedBackwards($query: String!) {
    searchCreationsConnection(query: $query, last: 5) { totalCount }
  }
`);

const MyCreationsAfter = graphql(`
  query MyCreationsAfter($after: String) {
    me { creations(first: 5, after: $after) { edges { node { id } } } }
  }
`);

describe('creation search over GraphQL', () => {
  let t: TestApp;
  let alice: TestUser;
  let bob: TestUser;
  const hot = new Set<string>();

  setUp(async (start) => {
    t = await start.app();
    alice = await t.createUser('alice');
    bob = await t.createUser('bob');
    const f = fixtures(t);
    const agent = await f.agent(bob, { key: 'kite-maker' });
    for (let i = 0; i < 12; i++) {
      const c = await searchableCreation(t, bob, {
        name: `Kite over the dunes ${i}`,
        prompt: 'a red kite flying over sand dunes',
        agentId: agent.id,
      });
      if (i % 4 === 0) {
        await t.services.creations.like(await t.services.apiKeys.authenticate(alice.apiKey), c.id);
        hot.add(c.id);
      }
    }
    await searchableCreation(t, bob, { name: 'Kite over the dunes (private)', prompt: 'a red kite flying over sand dunes', public: false });
    await searchableCreation(t, alice, {
      name: 'Kite over the dunes (mine, private)',
      prompt: 'a red kite flying over sand dunes',
      public: false,
    });
  });

  describe('searchCreations', () => {
    it('returns the same page as REST, with scores and batched likedByMe', async () => {
      const data = expectData(await t.gql(SearchPage, { query: 'kite dunes', limit: 5, page: 2 }, alice.apiKey)).searchCreations;
      const rest = (await t.rest('GET', searchPath({ query: 'kite dunes', limit: 5, page: 2 }), { key: alice.apiKey })).body;
      const { docs, ...numbers } = data;
      const { docs: restDocs, ...restNumbers } = rest;
      expect(numbers).toEqual(restNumbers);
      expect(numbers).toMatchObject({ total: 13, pages: 3, page: 2, pagingCounter: 6, prevPage: 1, nextPage: 3 });
      expect(docs.map((d) => d.rawId)).toEqual(restDocs.map((d: { id: string }) => d.id));
      expect(docs.map((d) => d.score)).toEqual(restDocs.map((d: { score: number }) => d.score));
      expect(docs.every((d) => d.likedByMe === hot.has(d.rawId))).toBe(true);
      expect(docs.filter((d) => d.creator.username === 'bob').every((d) => d.agent === null || d.agent.owner.username === 'bob')).toBe(
        true,
      );
    });

    it("never returns someone else's private creation, and includes the caller's own", async () => {
      const names = expectData(await t.gql(SearchPage, { query: 'kite dunes', limit: 100 }, alice.apiKey)).searchCreations.docs.map(
        (d) => d.name,
      );
      expect(names).toContain('Kite over the dunes (mine, private)');
      expect(names).not.toContain('Kite over the dunes (private)');
    });

    it('filters and orders like REST', async () => {
      const data = expectData(
        await t.gql(
          SearchPage,
          { query: 'kite dunes', filter: { userId: bob.id }, orderBy: 'LIKE_COUNT', direction: 'DESC', limit: 100 },
          alice.apiKey,
        ),
      ).searchCreations;
      expect(data.total).toBe(12);
      expect(data.docs.slice(0, 3).map((d) => d.likeCount)).toEqual([1, 1, 1]);
      expect(data.docs.slice(3).every((d) => d.likeCount === 0)).toBe(true);
    });

    it('refuses bad arguments as BAD_USER_INPUT naming the argument', async () => {
      for (const [variables, field] of [
        [{ query: '' }, 'query'],
        [{ query: 'kite', page: 0 }, 'page'],
        [{ query: 'kite', limit: 101 }, 'limit'],
        [{ query: 'kite', filter: { tool: '' } }, 'tool'],
      ] as [{ query: string; page?: number; limit?: number; filter?: { tool: string } }, string][]) {
        const error = expectGraphQLError(await t.gql(SearchPage, variables, alice.apiKey), 'BAD_USER_INPUT');
        expect(error.extensions?.field).toBe(field);
      }
      expectGraphQLError(await t.gql(SearchPage, { query: 'kite' }, null), 'UNAUTHENTICATED');
    });

    it('runs the same number of SQL statements for 2 results as for 12, with creator, agent, owner and likedByMe', async () => {
      const count = async (limit: number) => {
        let docs = 0;
        const n = await t.countQueries(
          async () =>
            (docs = expectData(await t.gql(SearchPage, { query: 'kite dunes', limit, filter: { userId: bob.id } }, alice.apiKey))
              .searchCreations.docs.length),
        );
        return { docs, n };
      };
      const small = await count(2);
      const large = await count(12);
      expect([small.docs, large.docs]).toEqual([2, 12]);
      expect(large.n).toBe(small.n);
      expect(large.n).toBeLessThanOrEqual(12);
    });
  });

  describe('searchCreationsConnection', () => {
    it('scrolls through every match exactly once, in the order of the pages', async () => {
      for (const [orderBy, direction] of [
        ['SCORE', 'DESC'],
        ['CREATED_AT', 'ASC'],
        ['LIKE_COUNT', 'DESC'],
      ] as const) {
        const seen: string[] = [];
        let after: string | null = null;
        for (let guard = 0; guard < 10; guard++) {
          const feed: any = expectData(
            await t.gql(SearchFeed, { query: 'kite dunes', first: 4, after, orderBy, direction }, alice.apiKey),
          ).searchCreationsConnection;
          expect(feed.totalCount).toBe(13);
          seen.push(...feed.edges.map((e: any) => e.node.rawId));
          expect(feed.pageInfo.hasPreviousPage).toBe(after !== null);
          if (!feed.pageInfo.hasNextPage) break;
          after = feed.pageInfo.endCursor;
        }
        const rest = (
          await t.rest(
            'GET',
            searchPath({
              query: 'kite dunes',
              limit: 100,
              orderBy: orderBy === 'SCORE' ? 'score' : orderBy === 'CREATED_AT' ? 'createdAt' : 'likeCount',
              direction: direction.toLowerCase(),
            }),
            { key: alice.apiKey },
          )
        ).body;
        expect(seen).toEqual(rest.docs.map((d: { id: string }) => d.id));
      }
    });

    it('keeps its place when an earlier result disappears', async () => {
      const first = expectData(
        await t.gql(SearchFeed, { query: 'kite dunes', first: 3, orderBy: 'CREATED_AT', direction: 'ASC' }, alice.apiKey),
      ).searchCreationsConnection;
      const next = (after: string) =>
        t.gql(SearchFeed, { query: 'kite dunes', first: 3, after, orderBy: 'CREATED_AT', direction: 'ASC' }, alice.apiKey);
      const expected = expectData(await next(first.pageInfo.endCursor!)).searchCreationsConnection.edges.map((e) => e.node.rawId);
      const gone = first.edges[0]!.node.rawId;
      await t.db.creation.update({ where: { id: gone }, data: { deleted: true } });
      try {
        expect(expectData(await next(first.pageInfo.endCursor!)).searchCreationsConnection.edges.map((e) => e.node.rawId)).toEqual(
          expected,
        );
      } finally {
        await t.db.creation.update({ where: { id: gone }, data: { deleted: false } });
      }
    });

    it('refuses a cursor it did not make, or one from another order, as BAD_USER_INPUT "Invalid cursor"', async () => {
      const feed = expectData(await t.gql(SearchFeed, { query: 'kite dunes', first: 2 }, alice.apiKey)).searchCreationsConnection;
      for (const [after, orderBy] of [
        ['not-a-cursor', undefined],
        [Buffer.from('{"o":"score"}').toString('base64url'), undefined],
        [Buffer.from('{"o":"likeCount","d":"desc","k":1e300,"id":"x"}').toString('base64url'), 'LIKE_COUNT'],
        [feed.pageInfo.endCursor!, 'CREATED_AT'],
      ] as const) {
        const error = expectGraphQLError(
          await t.gql(SearchFeed, { query: 'kite dunes', first: 2, after, orderBy }, alice.apiKey),
          'BAD_USER_INPUT',
        );
        expect(error.message).toBe('Invalid cursor');
      }
    });

    it('pages forward only: `last` is refused, naming it', async () => {
      expect(
        expectGraphQLError(await t.gql(SearchFeedBackwards, { query: 'kite' }, alice.apiKey), 'BAD_USER_INPUT').extensions?.field,
      ).toBe('last');
    });
  });

  it('me.creations answers a garbled cursor with BAD_USER_INPUT "Invalid cursor" too', async () => {
    const error = expectGraphQLError(await t.gql(MyCreationsAfter, { after: 'garbage' }, alice.apiKey), 'BAD_USER_INPUT');
    expect(error.message).toBe('Invalid cursor');
  });
});

describe('creation search over REST', () => {
  let t: TestApp;
  let alice: TestUser;
  let bob: TestUser;
  let f: ReturnType<typeof fixtures>;

  setUp(async (start) => {
    t = await start.app();
    f = fixtures(t);
    alice = await t.createUser('alice');
    bob = await t.createUser('bob');
  });

  const search = (user: TestUser, params: Record<string, string | number | undefined>) =>
    t.rest('GET', searchPath(params), { key: user.apiKey });
  const names = (res: { body: { docs: { name: string }[] } }) => res.body.docs.map((d) => d.name);

  describe('GET /v2/creations/search with the built-in embeddings', () => {
    const labelled = [
      { name: 'Lighthouse in a thunderstorm', prompt: 'a lighthouse in a thunderstorm, watercolor' },
      { name: 'Fox reading under a streetlamp', prompt: 'a fox reading a book under a streetlamp at night' },
      { name: 'Koi fish circling a full moon', prompt: 'koi fish circling a full moon, ukiyo-e' },
      { name: 'Cat asleep on a stack of zines', prompt: 'a cat asleep on a stack of zines, risograph' },
      { name: 'Robot watering ferns', prompt: 'a small robot watering ferns in a greenhouse' },
      { name: 'Mountain hut in deep snow', prompt: 'a mountain hut in deep snow, cinematic photograph' },
      { name: 'Bakery window at dawn', prompt: 'a bakery window at dawn with fresh croissants' },
      { name: 'Whale drifting above a city', prompt: 'a whale drifting above a city at dusk' },
    ];

    beforeAll(async () => {
      for (const c of labelled) await searchableCreation(t, bob, c);
    });

    it.each([
      ['lighthouse storm', 'Lighthouse in a thunderstorm'],
      ['a fox with a book', 'Fox reading under a streetlamp'],
      ['sleeping cat', 'Cat asleep on a stack of zines'],
      ['snowy mountain', 'Mountain hut in deep snow'],
      ['croissants', 'Bakery window at dawn'],
      ['whales', 'Whale drifting above a city'],
    ])('"%s" ranks "%s" first', async (query, expected) => {
      const res = await search(alice, { query });
      expect(res.status).toBe(200);
      expect(names(res)[0]).toBe(expected);
      const scores = res.body.docs.map((d: { score: number }) => d.score);
      expect(scores).toEqual([...scores].sort((a, b) => b - a));
    });

    it('a query about nothing in the library finds nothing, and says so with a consistent page', async () => {
      const res = await search(alice, { query: 'quantum chromodynamics lecture' });
      expect(res.body).toEqual({
        docs: [],
        total: 0,
        limit: 20,
        page: 1,
        pages: 1,
        pagingCounter: 1,
        hasPrevPage: false,
        hasNextPage: false,
        prevPage: null,
        nextPage: null,
      });
    });

    it('answers each creation with the documented fields', async () => {
      const agent = await f.agent(bob, {
        key: 'lamp-lighter',
        name: 'Lamp Lighter',
        image: 'https://cdn.example.com/agent.png',
        public: true,
      });
      const c = await searchableCreation(t, bob, {
        name: 'Tilted lamppost',
        prompt: 'a tilted lamppost in fog',
        agentId: agent.id,
        tool: 'sdxl',
      });
      const res = await search(alice, { query: 'tilted lamppost fog', limit: 1 });
      expect(res.body.docs[0]).toEqual({
        _id: c.id,
        id: c.id,
        url: c.url,
        thumbnail: null,
        name: 'Tilted lamppost',
        tool: 'sdxl',
        args: { prompt: 'a tilted lamppost in fog' },
        mediaAttributes: {},
        user: { _id: bob.id, id: bob.id, username: 'bob' },
        agent: {
          _id: agent.id,
          id: agent.id,
          key: 'lamp-lighter',
          username: 'lamp-lighter',
          name: 'Lamp Lighter',
          image: 'https://cdn.example.com/agent.png',
        },
        likeCount: 0,
        createdAt: isoDate,
        score: expect.any(Number),
      });
      expect(res.body.docs[0].score).toBeGreaterThan(0.5);
      expect(res.body.docs[0].score).toBeLessThanOrEqual(1);
    });

    it("shows someone else's private agent as null, as the rest of the API does", async () => {
      const hidden = await f.agent(bob, { key: 'hidden-helper', public: false });
      await searchableCreation(t, bob, { name: 'Porcelain teapot', agentId: hidden.id });
      expect((await search(alice, { query: 'porcelain teapot', limit: 1 })).body.docs[0].agent).toBeNull();
      expect((await search(bob, { query: 'porcelain teapot', limit: 1 })).body.docs[0].agent).toMatchObject({
        id: hidden.id,
        key: 'hidden-helper',
      });
    });
  });

  describe('paging', () => {
    let all: string[];

    beforeAll(async () => {
      for (let i = 0; i < 7; i++) await searchableCreation(t, bob, { name: `Origami crane ${i}`, prompt: `origami crane number ${i}` });
      const res = await search(alice, { query: 'origami crane', limit: 100 });
      all = res.body.docs.map((d: { id: string }) => d.id);
    });

    it('counts the matches once and splits them into pages with the paginate plugin numbers', async () => {
      expect(all).toHaveLength(7);
      const page = async (n: number) => (await search(alice, { query: 'origami crane', limit: 3, page: n })).body;
      const { docs: d1, ...p1 } = await page(1);
      expect(p1).toEqual({
        total: 7,
        limit: 3,
        page: 1,
        pages: 3,
        pagingCounter: 1,
        hasPrevPage: false,
        hasNextPage: true,
        prevPage: null,
        nextPage: 2,
      });
      const { docs: d2, ...p2 } = await page(2);
      expect(p2).toEqual({
        total: 7,
        limit: 3,
        page: 2,
        pages: 3,
        pagingCounter: 4,
        hasPrevPage: true,
        hasNextPage: true,
        prevPage: 1,
        nextPage: 3,
      });
      const { docs: d3, ...p3 } = await page(3);
      expect(p3).toEqual({
        total: 7,
        limit: 3,
        page: 3,
        pages: 3,
        pagingCounter: 7,
        hasPrevPage: true,
        hasNextPage: false,
        prevPage: 2,
        nextPage: null,
      });
      // The pages are the one full list cut in three: nothing twice, nothing missing.
      expect([...d1, ...d2, ...d3].map((d: { id: string }) => d.id)).toEqual(all);
      expect([d1.length, d2.length, d3.length]).toEqual([3, 3, 1]);
    });

    it('past the last page: no docs, and the numbers the plugin gives (prevPage one back)', async () => {
      const res = await search(alice, { query: 'origami crane', limit: 3, page: 5 });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        docs: [],
        total: 7,
        limit: 3,
        page: 5,
        pages: 3,
        pagingCounter: 13,
        hasPrevPage: true,
        hasNextPage: false,
        prevPage: 4,
        nextPage: null,
      });
    });

    it('a limit equal to the total makes one page; a larger one too', async () => {
      for (const limit of [7, 100]) {
        const { docs, ...meta } = (await search(alice, { query: 'origami crane', limit })).body;
        expect(meta).toEqual({
          total: 7,
          limit,
          page: 1,
          pages: 1,
          pagingCounter: 1,
          hasPrevPage: false,
          hasNextPage: false,
          prevPage: null,
          nextPage: null,
        });
        expect(docs.map((d: { id: string }) => d.id)).toEqual(all);
      }
    });

    it('runs the same number of SQL statements for a page of 2 as for a page of 20', async () => {
      for (let i = 0; i < 20; i++)
        await searchableCreation(t, alice, {
          name: `Paper boat ${i}`,
          prompt: `a paper boat in a rain gutter ${i}`,
          agentId: (await f.agent(alice)).id,
        });
      let small: any;
      let large: any;
      const smallCount = await t.countQueries(async () => (small = await search(alice, { query: 'paper boat', limit: 2 })));
      const largeCount = await t.countQueries(async () => (large = await search(alice, { query: 'paper boat', limit: 20 })));
      expect(small.body.docs).toHaveLength(2);
      expect(large.body.docs).toHaveLength(20);
      expect(large.body.docs.every((d: any) => d.user.username === 'alice' && d.agent?.key)).toBe(true);
      expect(largeCount).toBe(smallCount);
      expect(largeCount).toBeLessThanOrEqual(10);
    });
  });

  describe('filters, ordering and visibility', () => {
    const lanterns: Record<string, { id: string; owner: 'alice' | 'bob'; visibleTo: ('alice' | 'bob')[]; agent?: string; tool: string }> =
      {};
    let agents: { alice: string; bob: string; bobPrivate: string };

    beforeAll(async () => {
      agents = {
        alice: (await f.agent(alice, { key: 'alice-lanterns' })).id,
        bob: (await f.agent(bob, { key: 'bob-lanterns' })).id,
        bobPrivate: (await f.agent(bob, { key: 'bob-secret-lanterns', public: false })).id,
      };
      const make = async (
        key: string,
        owner: TestUser,
        o: { public: boolean; deleted?: boolean; agent?: keyof typeof agents; tool: string },
        visibleTo: ('alice' | 'bob')[],
      ) => {
        const c = await searchableCreation(t, owner, {
          name: `Sky lantern festival ${key}`,
          prompt: 'sky lanterns floating over a river',
          public: o.public,
          deleted: o.deleted,
          agentId: o.agent && agents[o.agent],
          tool: o.tool,
        });
        lanterns[key] = { id: c.id, owner: owner === alice ? 'alice' : 'bob', visibleTo, agent: o.agent && agents[o.agent], tool: o.tool };
      };
      await make('a-public', alice, { public: true, agent: 'alice', tool: 'flux_dev' }, ['alice', 'bob']);
      await make('a-private', alice, { public: false, agent: 'alice', tool: 'wan_t2v' }, ['alice']);
      await make('b-public', bob, { public: true, agent: 'bob', tool: 'flux_dev' }, ['alice', 'bob']);
      await make('b-private', bob, { public: false, agent: 'bob', tool: 'flux_dev' }, ['bob']);
      await make('b-deleted', bob, { public: true, deleted: true, agent: 'bob', tool: 'flux_dev' }, []);
      await make('b-own-deleted', bob, { public: false, deleted: true, tool: 'sdxl' }, []);
      await make('b-secret-agent', bob, { public: true, agent: 'bobPrivate', tool: 'sdxl' }, ['alice', 'bob']);
      // Likes, so that likeCount orders differ from creation order.
      const likers = [await t.createUser(), await t.createUser(), await t.createUser()];
      for (const [key, count] of [
        ['b-public', 3],
        ['a-private', 0],
        ['a-public', 1],
        ['b-secret-agent', 2],
        ['b-private', 2],
      ] as const) {
        for (const u of likers.slice(0, count))
          await t.services.creations.like(await viewerOf(t, u), lanterns[key]!.id).catch(() => undefined);
      }
    });

    const filtersFor = () => [
      {},
      { agentId: agents.alice },
      { agentId: agents.bob },
      { agentId: agents.bobPrivate },
      { userId: alice.id },
      { userId: bob.id },
      { tool: 'flux_dev' },
      { tool: 'wan_t2v' },
      { tool: 'sdxl' },
      { userId: bob.id, tool: 'flux_dev', agentId: agents.bob },
    ];
    const expectedKeys = (viewer: 'alice' | 'bob', filter: { agentId?: string; userId?: string; tool?: string }) =>
      Object.entries(lanterns)
        .filter(([, c]) => c.visibleTo.includes(viewer))
        .filter(
          ([, c]) =>
            (!filter.agentId || c.agent === filter.agentId) &&
            (!filter.userId || (c.owner === 'alice' ? alice.id : bob.id) === filter.userId) &&
            (!filter.tool || c.tool === filter.tool),
        )
        .map(([key]) => key)
        .sort();
    const keysOf = (docs: { id: string }[]) =>
      docs.map((d) => Object.entries(lanterns).find(([, c]) => c.id === d.id)?.[0] ?? `other:${d.id}`).sort();

    it("every filter, order and direction shows public creations and the caller's own, never someone else's private or anything deleted", async () => {
      for (const [viewer, user] of [
        ['alice', alice],
        ['bob', bob],
      ] as const) {
        for (const filter of filtersFor()) {
          for (const orderBy of ['score', 'createdAt', 'likeCount']) {
            for (const direction of ['desc', 'asc']) {
              const res = await search(user, { query: 'sky lantern festival', ...filter, orderBy, direction, limit: 100 });
              expect(res.status).toBe(200);
              expect({ viewer, filter, orderBy, direction, keys: keysOf(res.body.docs) }).toEqual({
                viewer,
                filter,
                orderBy,
                direction,
                keys: expectedKeys(viewer, filter),
              });
              expect(res.body.total).toBe(res.body.docs.length);
            }
          }
        }
      }
    });

    it('orders by creation date and by likes, both directions, the id breaking ties', async () => {
      const docs = async (orderBy: string, direction: string) =>
        (await search(alice, { query: 'sky lantern festival', orderBy, direction, limit: 100 })).body.docs as {
          id: string;
          createdAt: string;
          likeCount: number;
        }[];
      const byDate = await docs('createdAt', 'desc');
      expect(byDate.map((d) => d.createdAt)).toEqual(
        byDate
          .map((d) => d.createdAt)
          .sort()
          .reverse(),
      );
      expect((await docs('createdAt', 'asc')).map((d) => d.id)).toEqual(byDate.map((d) => d.id).reverse());
      const byLikes = await docs('likeCount', 'desc');
      expect(byLikes.map((d) => d.likeCount)).toEqual([3, 2, 1, 0]);
      expect(keysOf([byLikes[0]!])).toEqual(['b-public']);
      expect((await docs('likeCount', 'asc')).map((d) => d.likeCount)).toEqual([0, 1, 2, 3]);
      const byScoreAsc = (await search(alice, { query: 'sky lantern festival', direction: 'asc', limit: 100 })).body.docs.map(
        (d: { score: number }) => d.score,
      );
      expect(byScoreAsc).toEqual([...byScoreAsc].sort((a, b) => a - b));
    });

    it("a creation made private or deleted leaves the others' results at once, and comes back when restored", async () => {
      const id = lanterns['a-public']!.id;
      const bobSees = async () =>
        (await search(bob, { query: 'sky lantern festival', limit: 100 })).body.docs.some((d: { id: string }) => d.id === id);
      expect(await bobSees()).toBe(true);
      await t.db.creation.update({ where: { id }, data: { public: false } });
      expect(await bobSees()).toBe(false);
      expect((await search(alice, { query: 'sky lantern festival', limit: 100 })).body.docs.some((d: { id: string }) => d.id === id)).toBe(
        true,
      );
      await t.db.creation.update({ where: { id }, data: { public: true, deleted: true } });
      expect(await bobSees()).toBe(false);
      await t.db.creation.update({ where: { id }, data: { deleted: false } });
      expect(await bobSees()).toBe(true);
    });
  });

  describe('bad requests', () => {
    // Which parameters are refused, and why, is the search's rule (test/rules/search.test.ts, "names
    // the parameter at fault", "refuses … asking the provider nothing"); here, the 400 {message} naming it.
    it.each([
      [{}, 'query: is required'],
      [{ query: 'x', page: '1.5' }, 'page: must be a whole number from 1 to 1000000'],
      [{ query: 'x', orderBy: 'name' }, 'orderBy: must be one of score, createdAt, likeCount'],
    ])('%j → 400 "%s"', async (params, message) => {
      expectError(await search(alice, params as Record<string, string>), 400, 'message', message);
    });

    it('a parameter given twice is refused, naming it', async () => {
      expectError(
        await t.rest('GET', '/v2/creations/search?query=a&query=b', { key: alice.apiKey }),
        400,
        'message',
        'query: must be a string',
      );
    });

    it('unknown filter ids are not errors: they match nothing', async () => {
      const res = await search(alice, { query: 'sky lantern festival', agentId: 'no-such-agent' });
      expect(res.status).toBe(200);
      expect(res.body.total).toBe(0);
    });

    it('needs an API key', async () => {
      expect(await expectRejectsBadKeys(t, 'GET', searchPath({ query: 'lantern' }))).toBe(true);
    });
  });
});

describe('search over the demo data with nothing configured', () => {
  let t: TestApp;
  let manifest: DemoManifest;

  setUp(async (start) => {
    t = await start.app();
    manifest = await loadDemo(t.services);
  });

  const search = async (username: string, query: string) =>
    (await t.rest('GET', searchPath({ query, limit: 100 }), { key: manifest.users.find((u) => u.username === username)!.apiKey })).body;

  it('finds the demo creations by their subject, with the built-in embeddings', async () => {
    const page = await search('bob', 'lighthouse in a storm');
    expect(page.docs[0].name).toMatch(/^Lighthouse in a thunderstorm \(/);
    // Every lighthouse is found; the ones bob may not see (alice's private ones) are not.
    const visibleLighthouses = manifest.creations.filter((c, n) => n % 20 === 1 && (c.public || c.owner === 'bob'));
    expect(
      page.docs
        .filter((d: { name: string }) => d.name.startsWith('Lighthouse'))
        .map((d: { id: string }) => d.id)
        .sort(),
    ).toEqual(visibleLighthouses.map((c) => c.id).sort());
    expect(
      page.docs.every(
        (d: { id: string }) =>
          manifest.creations.find((c) => c.id === d.id)!.public || manifest.creations.find((c) => c.id === d.id)!.owner === 'bob',
      ),
    ).toBe(true);
  });

  it('loading the demo again embeds nothing twice', async () => {
    const before = await t.db.creation.findMany({ where: { embeddingProvider: 'hashed-ngrams-v1' }, select: { id: true } });
    expect(before).toHaveLength(manifest.creations.length);
    await loadDemo(t.services);
    expect(await t.services.search.indexCreations(manifest.creations.map((c) => c.id))).toEqual({ embedded: 0 });
  });
});

describe('creation search through an embedding server', () => {
  /**
   * Search through an embedding server: a fake one on loopback speaking OpenAI's wire format and
   * answering known vectors, so ranking follows meaning the test decides, not shared words.
   */
  let t: TestApp;
  let server: FakeEmbeddings;
  let alice: TestUser;

  setUp(async (start) => {
    server = await start.service(
      startFakeEmbeddings({
        // Creations (their names are their whole text).
        'Lighthouse at the cliff': axis(0),
        'Fox in the snow': axis(1),
        'Koi pond': axis(2),
        'Night harbour': axis(0, 3, 1),
        // Queries sharing no word with what they should find.
        'a tall tower that guides ships': axis(0, 5, 0.2),
        'winter animal': axis(1, 6, 0.5),
      }),
    );
    t = await start.app({
      search: {
        ...defaultSearchConfig,
        embeddings: { kind: 'http', url: server.url, model: 'fake-clip', batchSize: 16, timeoutMs: 10_000, retries: 0 },
      },
    });
    alice = await t.createUser('alice');
    for (const name of ['Lighthouse at the cliff', 'Fox in the snow', 'Koi pond', 'Night harbour'])
      await searchableCreation(t, alice, { name });
  });

  const search = async (query: string, extra: Record<string, string | number> = {}) =>
    (await t.rest('GET', searchPath({ query, ...extra }), { key: alice.apiKey })).body;

  describe('search with an OpenAI-compatible embedding server', () => {
    it('ranks by the cosine of the known vectors: the expected creation first, unrelated ones cut', async () => {
      const page = await search('a tall tower that guides ships');
      expect(page.docs.map((d: { name: string }) => d.name)).toEqual(['Lighthouse at the cliff', 'Night harbour']);
      expect(page.total).toBe(2);
      expect(page.docs[0].score).toBeCloseTo(1 / Math.sqrt(1.04), 5);
      expect(page.docs[1].score).toBeCloseTo(Math.SQRT1_2 / Math.sqrt(1.04), 5);
      expect((await search('winter animal')).docs.map((d: { name: string }) => d.name)).toEqual(['Fox in the snow']);
      expect((await search('something the server has never heard of')).total).toBe(0);
    });

    it('stores the provider and the dimension with each embedding', async () => {
      const rows = await t.db.creation.findMany({
        where: { userId: alice.id },
        select: { embeddingProvider: true, embeddingDimensions: true },
      });
      expect(rows).toHaveLength(4);
      expect(new Set(rows.map((r) => `${r.embeddingProvider}/${r.embeddingDimensions}`))).toEqual(new Set(['openai-http:fake-clip/768']));
    });

    it('embeds a query text once: paging asks the server nothing new', async () => {
      const before = server.requests.length;
      await search('winter animal', { page: 1, limit: 1 });
      await search('winter animal', { page: 2, limit: 1 });
      expect(server.requests.length - before).toBe(0);
      await search('a brand new question');
      expect(server.requests.slice(before).map((r) => r.input)).toEqual([['a brand new question']]);
    });

    it('never compares vectors of two providers: a creation embedded by another provider is found only after reembed', async () => {
      const offline = searchService(searchStore(t.db), defaultSearchConfig, hashedNgramsProvider);
      const stray = await t.db.creation.create({
        data: {
          userId: alice.id,
          tool: 'flux_dev',
          name: 'Lighthouse at the cliff',
          url: 'https://cdn.example.com/stray.png',
          public: true,
        },
      });
      await offline.indexCreations([stray.id]);
      expect((await t.db.creation.findUniqueOrThrow({ where: { id: stray.id } })).embeddingProvider).toBe('hashed-ngrams-v1');
      expect((await search('a tall tower that guides ships')).docs.map((d: { id: string }) => d.id)).not.toContain(stray.id);

      const progress: [number, number][] = [];
      expect(await t.services.search.reembed({ onProgress: (done, total) => progress.push([done, total]) })).toEqual({
        reembedded: 1,
        provider: 'openai-http:fake-clip',
      });
      expect(progress).toEqual([
        [0, 1],
        [1, 1],
      ]);
      expect((await search('a tall tower that guides ships')).docs.map((d: { id: string }) => d.id)).toContain(stray.id);
      // Nothing left to do.
      expect(await t.services.search.reembed()).toEqual({ reembedded: 0, provider: 'openai-http:fake-clip' });
    });

    it('answers 500 without details when the embedding server fails, and works again when it is back', async () => {
      server.fail(1, 500);
      const res = await t.rest('GET', searchPath({ query: 'a question while the server is down' }), { key: alice.apiKey });
      expect(res.status).toBe(500);
      expectNoInternals(JSON.stringify(res.body));
      expect(JSON.stringify(res.body)).not.toContain('127.0.0.1');
      expect((await t.rest('GET', searchPath({ query: 'a question while the server is down' }), { key: alice.apiKey })).status).toBe(200);
    });

    it('names the provider and the storage in /healthz', async () => {
      const health = (await t.rest('GET', '/healthz')).body;
      expect(health.search.embeddings).toMatch(
        /^openai-http:fake-clip: OpenAI-compatible embedding server at http:\/\/127\.0\.0\.1:\d+, model fake-clip$/,
      );
      expect(health.search.storage).toMatch(/^(pgvector vector\(768\), HNSW|exact scan over real\[\])/);
    });
  });
});
