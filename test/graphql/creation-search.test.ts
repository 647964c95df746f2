import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { searchableCreation, searchPath } from '../search/support.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';

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
    expect(docs.filter((d) => d.creator.username === 'bob').every((d) => d.agent === null || d.agent.owner.username === 'bob')).toBe(true);
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
      expect(expectData(await next(first.pageInfo.endCursor!)).searchCreationsConnection.edges.map((e) => e.node.rawId)).toEqual(expected);
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
    expect(expectGraphQLError(await t.gql(SearchFeedBackwards, { query: 'kite' }, alice.apiKey), 'BAD_USER_INPUT').extensions?.field).toBe(
      'last',
    );
  });
});

it('me.creations answers a garbled cursor with BAD_USER_INPUT "Invalid cursor" too', async () => {
  const error = expectGraphQLError(await t.gql(MyCreationsAfter, { after: 'garbage' }, alice.apiKey), 'BAD_USER_INPUT');
  expect(error.message).toBe('Invalid cursor');
});
