import type { SearchConfig } from '../../config.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import type { CreationQuery, CreationRead } from '../creations/store.ts';
import { decodeCursor, encodeCursor } from './cursor.ts';
import type { EmbeddingProvider } from './embeddings/provider.ts';
import { importCreations, type ImportOptions } from './importer.ts';
import { searchIndex } from './indexing.ts';
import { connectionPage, searchConnectionInput, searchInput, type SearchConnectionInput } from './inputs.ts';
import { paginate, type Page } from '../core/page.ts';
import { queryVectors } from './query-vectors.ts';
import type { Hit, NearestQuery, SearchStore } from './store.ts';

export type Scored<T> = T & { score: number };

/** One page of results read by cursor: each node with the cursor to continue after it. */
export interface SearchCursorPage<T> {
  nodes: Scored<T>[];
  cursor(node: Scored<T>): string;
  hasNextPage: boolean;
  hasPreviousPage: boolean;
  totalCount: number;
}

export function searchService(store: SearchStore, config: SearchConfig, provider: EmbeddingProvider) {
  const minScore = config.minScore ?? provider.defaultMinScore;
  const vectorOf = queryVectors(provider);
  const index = searchIndex(store, provider);

  async function nearest(viewer: Viewer, input: SearchConnectionInput, slice: NearestQuery['slice']) {
    const { query, orderBy, direction, ...filters } = input;
    return store.nearest({
      vector: await vectorOf(query),
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
  async function load<Q extends CreationQuery>(viewer: Viewer, hits: Hit[], query: Q | undefined): Promise<Scored<CreationRead<Q>>[]> {
    if (hits.length === 0) return [];
    const rows = await store.visibleAmong(
      viewer,
      hits.map((h) => h.id),
      query,
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    return hits.flatMap((h) => {
      const row = byId.get(h.id);
      return row ? [Object.assign(row, { score: h.score })] : [];
    });
  }

  return {
    provider,

    /** Where vectors live and how they are searched, for the start-up line and /healthz. */
    async describe() {
      const column = await store.column();
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
    async search<Q extends CreationQuery = object>(viewer: Viewer, rawInput: unknown, query?: Q): Promise<Page<Scored<CreationRead<Q>>>> {
      const { page, limit, ...input } = parseInput(searchInput, rawInput);
      const { total, hits } = await nearest(viewer, input, { offset: (page - 1) * limit, limit });
      return paginate(await load(viewer, hits, query), total, page, limit);
    },

    /** The same results as a forward cursor connection (for infinite scroll). */
    async connection<Q extends CreationQuery = object>(
      viewer: Viewer,
      rawInput: unknown,
      rawPage: { first?: number | null; after?: string | null; last?: number | null; before?: string | null },
      query?: Q,
    ): Promise<SearchCursorPage<CreationRead<Q>>> {
      const input = parseInput(searchConnectionInput, rawInput);
      const page = parseInput(connectionPage, rawPage);
      const after = page.after === undefined ? undefined : decodeCursor(page.after, input.orderBy, input.direction);
      const { total, hits } = await nearest(viewer, input, after ? { after, limit: page.first + 1 } : { offset: 0, limit: page.first + 1 });
      const shown = hits.slice(0, page.first);
      const keys = new Map(shown.map((h) => [h.id, h.key]));
      return {
        nodes: await load(viewer, shown, query),
        cursor: (node) => encodeCursor(input.orderBy, input.direction, keys.get(node.id)!, node.id),
        hasNextPage: hits.length > page.first,
        hasPreviousPage: Boolean(after),
        totalCount: total,
      };
    },

    indexCreations: index.indexCreations,
    reembed: index.reembed,

    /** Imports creations from JSON lines (importer.ts), embedding those that come without a vector of this provider. */
    importCreations: (lines: AsyncIterable<string>, options?: ImportOptions) => importCreations(store, provider, lines, options),
  };
}

export type SearchService = ReturnType<typeof searchService>;
