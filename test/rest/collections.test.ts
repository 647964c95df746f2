import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * Collections over REST, as their users would check them: who reads, who changes, what a reader
 * is shown inside (never a private creation of someone else, not even as a count or a cover), and
 * the bounds, each refusal changing nothing.
 */
describe('collections', () => {
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

describe('collection bounds', () => {
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
