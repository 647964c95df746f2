import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { applyMigrations } from '../../src/db/migrate.ts';
import { isShownIn } from '../../src/domain/collections/rules.ts';
import { collectionStore, readableCollections, shownItems } from '../../src/domain/collections/store.ts';
import { canReadCollection } from '../../src/domain/collections/rules.ts';
import { freshDatabase } from '../helpers/database.ts';

/**
 * What a collection shows a reader is written once for rows in hand (rules.ts) and three times as
 * statements (the store's page, its counts and covers, and the Prisma filter GraphQL plans with):
 * on every mix of reader, owner, author, public and deleted, all four pick the same creations.
 */
describe('the rule for what a collection shows', () => {
  let db: Database;
  let drop: () => Promise<void>;
  const users: { id: string }[] = [];
  const collections: { id: string; userId: string; public: boolean }[] = [];
  let creations: { id: string; userId: string; public: boolean; deleted: boolean }[] = [];

  beforeAll(async () => {
    const fresh = await freshDatabase();
    drop = fresh.drop;
    db = await openDatabase(fresh.config);
    await applyMigrations(db.migrationAdapterFactory);
    for (const username of ['owner', 'author', 'stranger']) users.push(await db.prisma.user.create({ data: { username } }));
    const [owner, author] = users;
    for (const by of [owner!, author!])
      for (const isPublic of [true, false])
        for (const deleted of [true, false])
          await db.prisma.creation.create({
            data: {
              userId: by.id,
              tool: 'flux',
              name: `${isPublic}-${deleted}`,
              url: 'https://cdn.example.com/x.png',
              public: isPublic,
              deleted,
            },
          });
    creations = await db.prisma.creation.findMany({ orderBy: { id: 'asc' } });
    for (const by of [owner!, author!])
      for (const isPublic of [true, false]) {
        const c = await db.prisma.collection.create({ data: { userId: by.id, name: `${isPublic}`, public: isPublic } });
        collections.push(c);
        for (const creation of creations)
          await db.prisma.collectionCreation.create({ data: { collectionId: c.id, creationId: creation.id } });
      }
  });
  afterAll(async () => {
    await db?.close();
    await drop?.();
  });

  it('selects the same creations, counts and covers in the store, in SQL and in Prisma as the rule does', async () => {
    const store = collectionStore(db.prisma);
    let shownSomewhere = 0;
    for (const viewer of users) {
      const summaries = await store.summaries(viewer, collections);
      for (const collection of collections) {
        const expected = creations.filter((c) => isShownIn(viewer, collection, c)).map((c) => c.id);
        shownSomewhere += expected.length;
        const page = await store.shown(viewer, collection, { after: null, take: 100, maxBytes: 10_000_000 }, {});
        expect(page.items.map((i) => i.creation.id)).toEqual(expected);
        expect(summaries.get(collection.id)).toEqual({ count: expected.length, coverId: expected[0] ?? null });
        const planned = await db.prisma.collectionCreation.findMany({
          where: { collectionId: collection.id, ...shownItems(viewer) },
          orderBy: { id: 'asc' },
        });
        expect(planned.map((i) => i.creationId)).toEqual(expected);
      }
      const light = await store.light(viewer.id, { after: null, take: 100, maxBytes: 10_000_000 });
      for (const c of light.collections) {
        const owned = collections.find((x) => x.id === c.id)!;
        expect(c.creationIds).toEqual(creations.filter((x) => isShownIn(viewer, owned, x)).map((x) => x.id));
      }
    }
    // Not vacuous: the owner sees their private creations in their own collections, a stranger only public ones.
    const [owner, , stranger] = users;
    const ownersOwn = collections.find((c) => c.userId === owner!.id)!;
    expect(creations.filter((c) => isShownIn(owner!, ownersOwn, c))).toHaveLength(3);
    expect(creations.filter((c) => isShownIn(stranger!, ownersOwn, c))).toHaveLength(2);
    expect(shownSomewhere).toBeGreaterThan(0);
  });

  it('reads the same collections as readable in Prisma as the rule does', async () => {
    for (const viewer of users) {
      const found = await db.prisma.collection.findMany({ where: readableCollections(viewer), orderBy: { id: 'asc' } });
      expect(found.map((c) => c.id)).toEqual(
        [...collections]
          .sort((a, b) => (a.id < b.id ? -1 : 1))
          .filter((c) => canReadCollection(viewer, c))
          .map((c) => c.id),
      );
    }
  });
});
