import type { SearchConfig } from '../../config.ts';
import type { Db } from '../../db/database.ts';
import { detectVectorColumn } from '../../db/vector-column.ts';
import type { Creation, Prisma } from '../../generated/prisma/client.ts';
import type { CreationQuery } from '../creations/service.ts';
import { visibleCreations } from '../discovery/store.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { creationText } from './creation-text.ts';
import { decodeCursor, encodeCursor } from './cursor.ts';
import { createEmbeddingProvider } from './embeddings/create.ts';
import type { EmbeddingProvider } from './embeddings/provider.ts';
import { connectionPage, searchConnectionInput, searchInput, type SearchConnectionInput } from './inputs.ts';
import { paginate, type Page } from './page.ts';
import { vectorStore, type Hit, type NearestQuery, type NewCreation, type VectorStore } from './store.ts';

export type Scored<T> = T & { score: number };

/** The client, or a transaction of it. */
type Client = Db | Prisma.TransactionClient;

/** One page of results read by cursor: each node with the cursor to continue after it. */
export interface SearchCursorPage<T> {
  nodes: Scored<T>[];
  cursor(node: Scored<T>): string;
  hasNextPage: boolean;
  hasPreviousPage: boolean;
  totalCount: number;
}

/** Creations whose embedding is missing or was made by another provider. */
const staleFor = (provider: EmbeddingProvider): Prisma.CreationWhereInput => ({
  OR: [{ embeddingProvider: null }, { embeddingProvider: { not: provider.name } }],
});

/** Query texts are embedded once per process: paging through results asks the provider nothing new. */
const QUERY_CACHE_SIZE = 1000;
const REEMBED_BATCH = 256;

export function searchService(db: Db, config: SearchConfig, provider: EmbeddingProvider = createEmbeddingProvider(config.embeddings)) {
  const minScore = config.minScore ?? provider.defaultMinScore;
  let store: Promise<VectorStore> | undefined;
  // Detected through the client at hand: inside a transaction on the embedded database (one
  // connection), a query through `db` would wait for that transaction forever.
  const vectors = (via: Client = db) =>
    (store ??= detectVectorColumn(via).then(
      (column) => vectorStore(db, column),
      (e) => {
        store = undefined;
        throw e;
      },
    ));

  const queryVectors = new Map<string, Float32Array>();
  async function queryVector(text: string): Promise<Float32Array> {
    const cached = queryVectors.get(text);
    if (cached) return cached;
    const [vector] = await provider.embed([text]);
    if (queryVectors.size >= QUERY_CACHE_SIZE) queryVectors.delete(queryVectors.keys().next().value!);
    queryVectors.set(text, vector!);
    return vector!;
  }

  async function nearest(viewer: Viewer, input: SearchConnectionInput, slice: NearestQuery['slice']) {
    const { query, orderBy, direction, ...filters } = input;
    return (await vectors()).nearest({
      vector: await queryVector(query),
      provider: provider.name,
      viewerId: viewer.id,
      filters,
      minScore,
      window: config.maxResults,
      efSearch: config.efSearch,
      orderBy,
      direction,
      slice,
    });
  }

  /**
   * The creations behind the hits, in hit order, each with its score. Visibility is checked again
   * here: a creation deleted or made private since the ranking is left out, never shown.
   */
  async function load<T extends Creation>(viewer: Viewer, hits: Hit[], query: CreationQuery): Promise<Scored<T>[]> {
    if (hits.length === 0) return [];
    const rows = (await db.creation.findMany({
      ...query,
      where: { id: { in: hits.map((h) => h.id) }, ...visibleCreations(viewer) },
    })) as T[];
    const byId = new Map(rows.map((r) => [r.id, r]));
    return hits.flatMap((h) => {
      const row = byId.get(h.id);
      return row ? [Object.assign(row, { score: h.score })] : [];
    });
  }

  async function embedAndStore(tx: Client, creations: readonly { id: string; name: string; args: unknown }[]) {
    if (creations.length === 0) return;
    const embeddings = await provider.embed(creations.map(creationText));
    await (await vectors(tx)).write(
      tx,
      provider.name,
      creations.map((c, i) => ({ id: c.id, vector: embeddings[i]! })),
    );
  }

  return {
    provider,

    /** Where vectors live and how they are searched, for the start-up line and /healthz. */
    async describe() {
      const column = (await vectors()).column;
      return {
        embeddings: `${provider.name}: ${provider.description}`,
        storage:
          column === 'vector'
            ? `pgvector vector(768), HNSW cosine index (ef_search ${config.efSearch}, iterative scans)`
            : 'exact scan over real[]: this PostgreSQL server has no pgvector. To index embeddings, install pgvector on it (Debian: the postgresql-<major version>-pgvector package), run "parley migrate" and restart',
      };
    },

    /**
     * Semantic search for one caller: the creations they may see (public and not deleted, or
     * their own) whose embedding is within the relevance cut for the query text, as one page.
     * Errors name the bad parameter.
     */
    async search<T extends Creation = Creation>(viewer: Viewer, rawInput: unknown, query: CreationQuery = {}): Promise<Page<Scored<T>>> {
      const { page, limit, ...input } = parseInput(searchInput, rawInput);
      const { total, hits } = await nearest(viewer, input, { offset: (page - 1) * limit, limit });
      return paginate(await load<T>(viewer, hits, query), total, page, limit);
    },

    /** The same results as a forward cursor connection (for infinite scroll). */
    async connection<T extends Creation = Creation>(
      viewer: Viewer,
      rawInput: unknown,
      rawPage: { first?: number | null; after?: string | null; last?: number | null; before?: string | null },
      query: CreationQuery = {},
    ): Promise<SearchCursorPage<T>> {
      const input = parseInput(searchConnectionInput, rawInput);
      const page = parseInput(connectionPage, rawPage);
      const after = page.after === undefined ? undefined : decodeCursor(page.after, input.orderBy, input.direction);
      const { total, hits } = await nearest(viewer, input, after ? { after, limit: page.first + 1 } : { offset: 0, limit: page.first + 1 });
      const shown = hits.slice(0, page.first);
      const keys = new Map(shown.map((h) => [h.id, h.key]));
      return {
        nodes: await load<T>(viewer, shown, query),
        cursor: (node) => encodeCursor(input.orderBy, input.direction, keys.get(node.id)!, node.id),
        hasNextPage: hits.length > page.first,
        hasPreviousPage: Boolean(after),
        totalCount: total,
      };
    },

    /**
     * Makes creations searchable: those of them without an embedding of the active provider are
     * embedded (name and prompt) and their vectors stored. Call it once the creations are
     * committed, or pass the transaction that writes them (which then also waits for the provider).
     */
    async indexCreations(ids: readonly string[], tx: Client = db) {
      const creations = await tx.creation.findMany({
        where: { id: { in: [...ids] }, ...staleFor(provider) },
        select: { id: true, name: true, args: true },
      });
      await embedAndStore(tx, creations);
      return { embedded: creations.length };
    },

    /** Inserts new creations with their vectors (from the active provider's space); returns the ids inserted. */
    async insertCreations(tx: Client, rows: readonly NewCreation[]) {
      return (await vectors(tx)).insertWithEmbeddings(tx, provider.name, rows);
    },

    /**
     * Re-embeds, in batches, every creation whose embedding is missing or from another provider
     * (or every creation, with `all`). Each batch is one write, so an interrupted run resumes
     * where it stopped.
     */
    async reembed(options: { all?: boolean; onProgress?: (done: number, total: number) => void } = {}) {
      const stale = options.all ? {} : staleFor(provider);
      const total = await db.creation.count({ where: stale });
      let done = 0;
      options.onProgress?.(done, total);
      for (let lastId: string | undefined; done < total; ) {
        const batch = await db.creation.findMany({
          where: { ...stale, ...(lastId ? { id: { gt: lastId } } : {}) },
          select: { id: true, name: true, args: true },
          orderBy: { id: 'asc' },
          take: REEMBED_BATCH,
        });
        if (batch.length === 0) break;
        await embedAndStore(db, batch);
        done += batch.length;
        lastId = batch.at(-1)!.id;
        options.onProgress?.(done, total);
      }
      return { reembedded: done, provider: provider.name };
    },
  };
}

export type SearchService = ReturnType<typeof searchService>;
