import type { Db } from '../../db/database.ts';
import type { VectorColumn } from '../../db/vector-column.ts';
import { Prisma } from '../../generated/prisma/client.ts';
import { type EmbeddingColumns, insertWithEmbeddings, writeEmbeddings } from '../creations/store.ts';
import { visibleCreationsSql } from '../discovery/store.ts';
import { EMBEDDING_DIMENSIONS } from './embeddings/provider.ts';
import type { SearchOrderBy } from './inputs.ts';
import type { Hit, NearestQuery, NewCreation, SortKey } from './store.ts';

/** float4 text that reads back as the same float4: 9 significant digits are enough. */
const numbers = (v: Float32Array) => Array.from(v, (x) => +x.toPrecision(9)).join(',');

/**
 * The statements on embeddings, for the two ways a database may hold them: pgvector's
 * `vector(768)` with its HNSW index, or `real[]` scanned exactly where pgvector is missing.
 */
export function vectorStore(db: Db, column: VectorColumn) {
  const literal = (v: Float32Array) => (column === 'vector' ? `[${numbers(v)}]` : `{${numbers(v)}}`);
  const cast = Prisma.raw(column === 'vector' ? 'vector' : 'real[]');
  // The vectors are search's; the row they sit in is the creations' store's to write.
  const columns = (provider: string): EmbeddingColumns => ({ provider, dimensions: EMBEDDING_DIMENSIONS, cast });
  const sortColumn = { score: Prisma.raw('score'), createdAt: Prisma.raw('"createdAt"'), likeCount: Prisma.raw('"likeCount"') };
  const keyParam = (orderBy: SearchOrderBy, key: SortKey) =>
    orderBy === 'createdAt'
      ? Prisma.sql`${(key as Date).toISOString()}::timestamp`
      : orderBy === 'score'
        ? Prisma.sql`${key}::float8`
        : Prisma.sql`${key}::int`;

  function nearestSql(q: NearestQuery) {
    const { agentId, userId, tool } = q.filters;
    const filters = [
      Prisma.sql`${visibleCreationsSql('c', q.viewerId)} AND c."embeddingProvider" = ${q.provider}`,
      ...(agentId !== undefined ? [Prisma.sql`c."agentId" = ${agentId}`] : []),
      ...(userId !== undefined ? [Prisma.sql`c."userId" = ${userId}`] : []),
      ...(tool !== undefined ? [Prisma.sql`c.tool = ${tool}`] : []),
    ];
    const where = Prisma.join(filters, ' AND ');
    // On vector(768) the ORDER BY is the indexed cosine distance, so HNSW finds the window; on
    // real[] every visible row is scored (vectors are unit length: the dot product is the cosine).
    return column === 'vector'
      ? Prisma.sql`SELECT c.id, c."createdAt", c."likeCount", c.embedding <=> ${literal(q.vector)}::vector AS distance
          FROM "Creation" c WHERE ${where} ORDER BY distance LIMIT ${q.window}`
      : Prisma.sql`SELECT c.id, c."createdAt", c."likeCount",
            1 - (SELECT sum(a::float8 * b) FROM unnest(c.embedding, ${literal(q.vector)}::real[]) AS u(a, b)) AS distance
          FROM "Creation" c WHERE ${where} ORDER BY distance LIMIT ${q.window}`;
  }

  function rankedSql(q: NearestQuery) {
    const dir = Prisma.raw(q.direction === 'asc' ? 'ASC' : 'DESC');
    const col = sortColumn[q.orderBy];
    const slice =
      'offset' in q.slice
        ? Prisma.sql`position > ${q.slice.offset}`
        : Prisma.sql`(${col}, id) ${Prisma.raw(q.direction === 'asc' ? '>' : '<')} (${keyParam(q.orderBy, q.slice.after.key)}, ${q.slice.after.id})`;
    return Prisma.sql`
      WITH nearest AS MATERIALIZED (${nearestSql(q)}),
      matches AS (SELECT id, "createdAt", "likeCount", 1 - distance AS score FROM nearest WHERE 1 - distance >= ${q.minScore}),
      ranked AS (SELECT *, row_number() OVER (ORDER BY ${col} ${dir}, id ${dir}) AS position FROM matches)
      SELECT t.total, r.id, r.score, r."createdAt", r."likeCount"
      FROM (SELECT count(*)::int AS total FROM ranked) t
      LEFT JOIN LATERAL (SELECT * FROM ranked WHERE ${slice} ORDER BY position LIMIT ${q.slice.limit}) r ON true
      ORDER BY r.position`;
  }

  type Row = { total: number; id: string | null; score: number | null; createdAt: Date | null; likeCount: number | null };

  return {
    column,

    /**
     * The matches of one query: how many there are in all (`total`) and the requested slice of
     * them, in one statement. On pgvector, `hnsw.ef_search` is raised and iterative index scans
     * are on for this transaction only, so filters that drop most neighbours still fill the window.
     */
    async nearest(q: NearestQuery): Promise<{ total: number; hits: Hit[] }> {
      const rows: Row[] =
        column === 'vector'
          ? (
              await db.$transaction([
                db.$queryRaw`SELECT set_config('hnsw.ef_search', ${String(q.efSearch)}, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)`,
                db.$queryRaw<Row[]>(rankedSql(q)),
              ])
            )[1]
          : await db.$queryRaw<Row[]>(rankedSql(q));
      return {
        total: rows[0]?.total ?? 0,
        hits: rows
          .filter((r) => r.id !== null)
          .map((r) => ({
            id: r.id!,
            score: r.score!,
            key: q.orderBy === 'score' ? r.score! : q.orderBy === 'createdAt' ? r.createdAt! : r.likeCount!,
          })),
      };
    },

    /** Inserts imported creations with their vectors (ids already present are left alone); the ids inserted. */
    insertWithEmbeddings: (provider: string, rows: readonly NewCreation[]) =>
      insertWithEmbeddings(
        db,
        columns(provider),
        rows.map((r) => ({ ...r, vector: literal(r.vector) })),
      ),

    /** Stores vectors (unit length, 768 dimensions) with the provider that made them. */
    write: (provider: string, rows: readonly { id: string; vector: Float32Array }[]) =>
      writeEmbeddings(
        db,
        columns(provider),
        rows.map((r) => ({ id: r.id, vector: literal(r.vector) })),
      ),
  };
}

export type VectorStore = ReturnType<typeof vectorStore>;
