import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { applyMigrations } from '../../src/db/migrate.ts';
import { Prisma } from '../../src/generated/prisma/client.ts';
import { isVisibleTo } from '../../src/domain/core/visibility.ts';
import { visibleCreations, visibleCreationsSql, visibleToFilter } from '../../src/domain/discovery/store.ts';
import { freshDatabase } from '../helpers/database.ts';

/**
 * The sharing rule is written once for a row in hand (core/visibility.ts) and once as statements
 * (discovery/store.ts): on every mix of owner, public and deleted, the forms pick the same rows.
 */
describe('the sharing rule', () => {
  let db: Database;
  let drop: () => Promise<void>;
  const viewers: { id: string }[] = [];

  beforeAll(async () => {
    const fresh = await freshDatabase();
    drop = fresh.drop;
    db = await openDatabase(fresh.config);
    await applyMigrations(db.migrationAdapterFactory);
    for (const username of ['owner', 'stranger']) viewers.push(await db.prisma.user.create({ data: { username } }));
    const owner = viewers[0]!.id;
    for (const isPublic of [true, false]) {
      const agentId = `agent-${isPublic}`;
      await db.prisma.user.create({ data: { id: agentId, username: agentId, type: 'agent' } });
      await db.prisma.agent.create({ data: { id: agentId, ownerId: owner, name: agentId, public: isPublic } });
      await db.prisma.model.create({ data: { userId: owner, name: `model-${isPublic}`, baseModel: 'sdxl', public: isPublic } });
      for (const deleted of [true, false]) {
        await db.prisma.creation.create({
          data: {
            userId: owner,
            tool: 'flux',
            name: `${isPublic}-${deleted}`,
            url: 'https://cdn.example.com/x.png',
            public: isPublic,
            deleted,
          },
        });
      }
    }
  });
  afterAll(async () => {
    await db?.close();
    await drop?.();
  });

  const ids = (rows: { id: string }[]) => rows.map((r) => r.id).sort();

  it('selects the same agents and models as the rule for a row in hand', async () => {
    const agents = await db.prisma.agent.findMany();
    const models = await db.prisma.model.findMany();
    expect(agents).toHaveLength(2);
    for (const viewer of viewers) {
      expect(ids(await db.prisma.agent.findMany({ where: visibleToFilter(viewer, 'ownerId') }))).toEqual(
        ids(agents.filter((a) => isVisibleTo(viewer, a, a.ownerId))),
      );
      expect(ids(await db.prisma.model.findMany({ where: visibleToFilter(viewer, 'userId') }))).toEqual(
        ids(models.filter((m) => isVisibleTo(viewer, m, m.userId))),
      );
    }
    const [owner, stranger] = viewers;
    expect(ids(await db.prisma.model.findMany({ where: visibleToFilter(owner!, 'userId') }))).toHaveLength(2);
    expect(ids(await db.prisma.model.findMany({ where: visibleToFilter(stranger!, 'userId') }))).toHaveLength(1);
  });

  it('selects the same creations in Prisma and in SQL: the visible ones not deleted', async () => {
    const creations = await db.prisma.creation.findMany();
    expect(creations).toHaveLength(4);
    for (const viewer of viewers) {
      const expected = ids(creations.filter((c) => !c.deleted && isVisibleTo(viewer, c, c.userId)));
      expect(ids(await db.prisma.creation.findMany({ where: visibleCreations(viewer) }))).toEqual(expected);
      const sql = await db.prisma.$queryRaw<{ id: string }[]>(
        Prisma.sql`SELECT c.id FROM "Creation" c WHERE ${visibleCreationsSql('c', viewer.id)}`,
      );
      expect(ids(sql)).toEqual(expected);
    }
    const [owner, stranger] = viewers;
    expect(ids(await db.prisma.creation.findMany({ where: visibleCreations(owner!) }))).toHaveLength(2);
    expect(ids(await db.prisma.creation.findMany({ where: visibleCreations(stranger!) }))).toHaveLength(1);
  });
});
