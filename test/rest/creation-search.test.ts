import { beforeAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { expectError, expectRejectsBadKeys, isoDate, viewerOf } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';
import { searchableCreation, searchPath } from '../search/support.ts';

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
  const lanterns: Record<string, { id: string; owner: 'alice' | 'bob'; visibleTo: ('alice' | 'bob')[]; agent?: string; tool: string }> = {};
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
