import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultSearchConfig } from '../../src/config.ts';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { applyMigrations } from '../../src/db/migrate.ts';
import { detectVectorColumn, upgradeToPgvector } from '../../src/db/vector-column.ts';
import { hashedNgramsProvider } from '../../src/domain/search/embeddings/hashed-ngrams.ts';
import { searchService } from '../../src/domain/search/service.ts';
import { searchStore } from '../../src/domain/search/store.ts';
import { freshDatabase } from '../helpers/database.ts';

/**
 * A database first migrated without pgvector keeps embeddings in real[]; `parley migrate` turns
 * them into an indexed vector(768) column once pgvector is there. Where the server has pgvector,
 * the test first puts the column back to real[] as such a database would have it.
 */
describe('embedding column upgrade', () => {
  let db: Database;
  let drop: () => Promise<void>;
  let pgvector: boolean;

  beforeAll(async () => {
    const fresh = await freshDatabase();
    drop = fresh.drop;
    db = await openDatabase(fresh.config);
    await applyMigrations(db.migrationAdapterFactory);
    [{ pgvector }] = await db.prisma.$queryRaw<
      [{ pgvector: boolean }]
    >`SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') AS pgvector`;
    if (pgvector) {
      await db.prisma.$executeRawUnsafe('DROP INDEX "Creation_embedding_hnsw_idx"');
      await db.prisma.$executeRawUnsafe('ALTER TABLE "Creation" ALTER COLUMN "embedding" TYPE real[] USING "embedding"::real[]');
    }
  });
  afterAll(async () => {
    await db.close();
    await drop();
  });

  it('keeps the stored vectors and the search results, and builds the HNSW index', async () => {
    expect(await detectVectorColumn(db.prisma)).toBe('real[]');
    const user = await db.prisma.user.create({ data: { username: 'upgrader' } });
    const names = ['Lighthouse in a thunderstorm', 'Fox reading under a streetlamp', 'Koi fish circling a full moon'];
    for (const name of names)
      await db.prisma.creation.create({
        data: { userId: user.id, tool: 'flux_dev', name, url: 'https://cdn.example.com/x.png', public: true },
      });
    const before = searchService(searchStore(db.prisma), defaultSearchConfig, hashedNgramsProvider);
    await before.indexCreations((await db.prisma.creation.findMany({ select: { id: true } })).map((c) => c.id));
    const results = async () =>
      (
        await searchService(searchStore(db.prisma), defaultSearchConfig, hashedNgramsProvider).search(
          { id: user.id },
          { query: 'lighthouse storm' },
        )
      ).docs.map((d) => [d.name, d.score.toFixed(5)]);
    const found = await results();
    expect(found[0]![0]).toBe('Lighthouse in a thunderstorm');

    if (!pgvector) {
      expect(await upgradeToPgvector(db.prisma)).toBe('pgvector unavailable');
      expect(await detectVectorColumn(db.prisma)).toBe('real[]');
      return;
    }
    expect(await upgradeToPgvector(db.prisma)).toBe('upgraded');
    expect(await detectVectorColumn(db.prisma)).toBe('vector');
    const [index] = await db.prisma.$queryRaw<
      { indexdef: string }[]
    >`SELECT indexdef FROM pg_indexes WHERE indexname = 'Creation_embedding_hnsw_idx'`;
    expect(index?.indexdef).toMatch(/USING hnsw \(embedding vector_cosine_ops\)/);
    expect(await results()).toEqual(found);
    expect(await upgradeToPgvector(db.prisma)).toBe('already pgvector');
  });
});
