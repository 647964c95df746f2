import type { EmbeddingProvider } from '../../../src/domain/search/embeddings/provider.ts';
import { unitVector } from '../../../src/domain/search/embeddings/provider.ts';
import type { Hit, SearchStore } from '../../../src/domain/search/store.ts';
import { ids, TestClock } from './clock.ts';

/**
 * Creations and their embeddings in maps, ranked as the Prisma store ranks them: only what the
 * viewer may see (public and not deleted, or their own), only vectors of the provider asked,
 * cosine at least `minScore`, the `window` nearest, then sorted and sliced.
 */
export interface IndexedCreation {
  id: string;
  userId: string;
  agentId: string | null;
  tool: string;
  name: string;
  public: boolean;
  deleted: boolean;
  likeCount: number;
  createdAt: Date;
  vectors: Map<string, Float32Array>;
}

/** Four dimensions are enough to place creations near and far from a query. */
export const towards = (...values: number[]) => unitVector(values);

/** A provider that knows the vectors of a few texts. */
export function tableProvider(known: Record<string, Float32Array>): EmbeddingProvider & { asked: string[] } {
  const asked: string[] = [];
  return {
    name: 'table',
    description: 'vectors from a table',
    defaultMinScore: 0.5,
    asked,
    async embed(texts) {
      asked.push(...texts);
      return texts.map((t) => known[t] ?? towards(0, 0, 0, 1));
    },
  };
}

export class SearchIndex {
  readonly clock = new TestClock();
  readonly creations = new Map<string, IndexedCreation>();
  readonly #id = ids('creation');

  add(userId: string, vector: Float32Array, fields: Partial<IndexedCreation> = {}) {
    const creation: IndexedCreation = {
      id: this.#id(),
      userId,
      agentId: null,
      tool: 'flux_schnell',
      name: 'a creation',
      public: true,
      deleted: false,
      likeCount: 0,
      createdAt: this.clock.now(),
      vectors: new Map([['table', vector]]),
      ...fields,
    };
    this.creations.set(creation.id, creation);
    this.clock.advance(1000);
    return creation;
  }
}

const dot = (a: Float32Array, b: Float32Array) => a.reduce((sum, x, i) => sum + x * b[i]!, 0);
const seenBy = (viewerId: string, c: IndexedCreation) => !c.deleted && (c.public || c.userId === viewerId);

export function memorySearchStore(index: SearchIndex): SearchStore {
  const unused = () => {
    throw new Error('not part of the search rules');
  };
  return {
    column: async () => 'real[]' as never,
    async nearest(q) {
      const scored = [...index.creations.values()]
        .filter((c) => seenBy(q.viewerId, c) && c.vectors.has(q.provider))
        .filter((c) => (!q.filters.agentId || c.agentId === q.filters.agentId) && (!q.filters.userId || c.userId === q.filters.userId))
        .filter((c) => !q.filters.tool || c.tool === q.filters.tool)
        .map((c) => ({ c, score: dot(c.vectors.get(q.provider)!, q.vector) }))
        .filter((s) => s.score >= q.minScore)
        .sort((a, b) => b.score - a.score)
        .slice(0, q.window);
      const key = (s: (typeof scored)[number]) =>
        q.orderBy === 'score' ? s.score : q.orderBy === 'likeCount' ? s.c.likeCount : s.c.createdAt.getTime();
      const sign = q.direction === 'desc' ? -1 : 1;
      const sorted = scored.sort((a, b) => sign * (key(a) - key(b)) || sign * a.c.id.localeCompare(b.c.id));
      const hits: Hit[] = sorted.map((s) => ({
        id: s.c.id,
        score: s.score,
        key: q.orderBy === 'createdAt' ? s.c.createdAt : q.orderBy === 'likeCount' ? s.c.likeCount : s.score,
      }));
      const from =
        'offset' in q.slice ? q.slice.offset : hits.findIndex((h) => h.id === (q.slice as { after: { id: string } }).after.id) + 1;
      return { total: hits.length, hits: hits.slice(from, from + q.slice.limit) };
    },
    visibleAmong: async (viewer, wanted) =>
      wanted.flatMap((id) => {
        const c = index.creations.get(id);
        return c && seenBy(viewer.id, c) ? [{ ...c } as never] : [];
      }),
    toEmbedAmong: unused,
    countToEmbed: unused,
    toEmbedAfter: unused,
    writeVectors: unused,
    insertWithVectors: unused,
    creatorsNamed: unused,
    existingIds: unused,
  };
}
