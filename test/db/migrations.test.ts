import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { applyMigrations } from '../../src/db/migrate.ts';
import { detectVectorColumn } from '../../src/db/vector-column.ts';
import { freshDatabase } from '../helpers/database.ts';

describe('migrations', () => {
  let db: Database;
  let drop: () => Promise<void>;
  let applied: string[];

  beforeAll(async () => {
    const fresh = await freshDatabase();
    drop = fresh.drop;
    db = await openDatabase(fresh.config);
    applied = await applyMigrations(db.migrationAdapterFactory);
  });
  afterAll(async () => {
    await db.close();
    await drop();
  });

  it('are recorded in _prisma_migrations as `prisma migrate deploy` records them, and apply once', async () => {
    expect(applied.length).toBeGreaterThan(0);
    const rows = await db.prisma.$queryRaw<{ migration_name: string; finished_at: Date | null; checksum: string }[]>`
      SELECT migration_name, finished_at, checksum FROM _prisma_migrations ORDER BY migration_name`;
    expect(rows.map((r) => r.migration_name)).toEqual(applied);
    for (const row of rows) {
      expect(row.finished_at).toBeInstanceOf(Date);
      expect(row.checksum).toMatch(/^[0-9a-f]{64}$/);
    }
    expect(await applyMigrations(db.migrationAdapterFactory)).toEqual([]);
  });

  it('store creation embeddings as vector(768) where pgvector exists and real[] where it does not', async () => {
    const [{ available }] = await db.prisma.$queryRaw<[{ available: boolean }]>`
      SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') AS available`;
    const [{ type }] = await db.prisma.$queryRaw<[{ type: string }]>`
      SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute
      WHERE attrelid = '"Creation"'::regclass AND attname = 'embedding'`;
    expect(type).toBe(available ? 'vector(768)' : 'real[]');
  });

  it('refuse negative balances and like counts at the database level', async () => {
    const user = await db.prisma.user.create({ data: { username: 'constrained' } });
    await expect(db.prisma.user.update({ where: { id: user.id }, data: { foreverBalance: -1 } })).rejects.toThrow();
    const creation = await db.prisma.creation.create({ data: { userId: user.id, tool: 'flux_dev', name: 'x', url: 'https://x' } });
    await expect(db.prisma.creation.update({ where: { id: creation.id }, data: { likeCount: -1 } })).rejects.toThrow();
    expect((await db.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).foreverBalance.toNumber()).toBe(0);
  });

  it('refuse an embedding stored without the provider and dimension that made it', async () => {
    const user = await db.prisma.user.create({ data: { username: 'unlabelled' } });
    const creation = await db.prisma.creation.create({ data: { userId: user.id, tool: 'flux_dev', name: 'x', url: 'https://x' } });
    const vector =
      (await detectVectorColumn(db.prisma)) === 'vector'
        ? `[${Array(768).fill(0.036).join(',')}]`
        : `{${Array(768).fill(0.036).join(',')}}`;
    const cast = (await detectVectorColumn(db.prisma)) === 'vector' ? 'vector' : 'real[]';
    await expect(
      db.prisma.$executeRawUnsafe(`UPDATE "Creation" SET embedding = $1::${cast} WHERE id = $2`, vector, creation.id),
    ).rejects.toThrow();
    await expect(
      db.prisma.$executeRawUnsafe(
        `UPDATE "Creation" SET embedding = $1::${cast}, "embeddingProvider" = 'p' WHERE id = $2`,
        vector,
        creation.id,
      ),
    ).rejects.toThrow();
    await db.prisma.$executeRawUnsafe(
      `UPDATE "Creation" SET embedding = $1::${cast}, "embeddingProvider" = 'p', "embeddingDimensions" = 768 WHERE id = $2`,
      vector,
      creation.id,
    );
    expect(await db.prisma.creation.findUniqueOrThrow({ where: { id: creation.id }, select: { embeddingProvider: true } })).toEqual({
      embeddingProvider: 'p',
    });
  });

  it('make usernames unique after case folding and NFKC, and stop with the clashing names rather than rename anyone', async () => {
    await db.prisma.user.create({ data: { username: 'Zoe' } });
    await expect(db.prisma.user.create({ data: { username: 'zoe' } })).rejects.toMatchObject({ code: 'P2002' });
    await expect(db.prisma.user.create({ data: { username: 'ＺＯＥ' } })).rejects.toMatchObject({ code: 'P2002' });

    // A database from before the rule, with clashes in it: the migration's check names them all.
    const script = await readFile(
      new URL('../../prisma/migrations/20261125000000_normalized_usernames/migration.sql', import.meta.url),
      'utf8',
    );
    const check = /DO \$\$[\s\S]*?END \$\$;/.exec(script)![0];
    await db.prisma.$executeRawUnsafe('DROP INDEX "User_username_normalized_key"');
    try {
      const clashing = await Promise.all(['ZOE', 'Max', 'MAX', 'ｍａｘ'].map((username) => db.prisma.user.create({ data: { username } })));
      const failure = await db.prisma.$executeRawUnsafe(check).then(
        () => null,
        (e: Error) => e.message,
      );
      expect(failure).toMatch(/Usernames must be unique regardless of case and Unicode form, and these clash: /);
      for (const u of [...clashing, { username: 'Zoe' }]) expect(failure).toContain(u.username);
      expect(await db.prisma.user.count({ where: { username: { in: ['ZOE', 'Max', 'MAX', 'ｍａｘ', 'Zoe'] } } })).toBe(5);
      await db.prisma.user.deleteMany({ where: { id: { in: clashing.map((u) => u.id) } } });
      await db.prisma.$executeRawUnsafe(check);
    } finally {
      await db.prisma.$executeRawUnsafe(
        'CREATE UNIQUE INDEX IF NOT EXISTS "User_username_normalized_key" ON "User" (lower(normalize("username", NFKC)))',
      );
    }
  });
});
