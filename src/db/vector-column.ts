import type { Db } from './database.ts';

/**
 * How the database holds embeddings: pgvector's `vector(768)` with an HNSW index, or `real[]`
 * on a PostgreSQL server without pgvector (decided by the first migration).
 */
export type VectorColumn = 'vector' | 'real[]';

type Sql = Pick<Db, '$queryRaw'>;

export async function detectVectorColumn(db: Sql): Promise<VectorColumn> {
  const [row] = await db.$queryRaw<{ type: string }[]>`
    SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = '"Creation"'::regclass AND attname = 'embedding'`;
  return row?.type.startsWith('vector') ? 'vector' : 'real[]';
}

/**
 * A database migrated on a server without pgvector keeps embeddings in `real[]`. Once pgvector
 * is installed on that server, this turns the column into `vector(768)` (the stored vectors are
 * kept) and builds the HNSW index, in one transaction. `parley migrate` runs it.
 */
export async function upgradeToPgvector(db: Db): Promise<'upgraded' | 'already pgvector' | 'pgvector unavailable'> {
  if ((await detectVectorColumn(db)) === 'vector') return 'already pgvector';
  const [{ available }] = await db.$queryRaw<
    [{ available: boolean }]
  >`SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') AS available`;
  if (!available) return 'pgvector unavailable';
  await db.$transaction([
    db.$executeRaw`CREATE EXTENSION IF NOT EXISTS vector`,
    db.$executeRaw`ALTER TABLE "Creation" ALTER COLUMN "embedding" TYPE vector(768) USING "embedding"::vector(768)`,
    db.$executeRaw`ALTER TABLE "Creation" ALTER COLUMN "embedding" SET STORAGE PLAIN`,
    db.$executeRaw`CREATE INDEX "Creation_embedding_hnsw_idx" ON "Creation" USING hnsw ("embedding" vector_cosine_ops)`,
  ]);
  return 'upgraded';
}
