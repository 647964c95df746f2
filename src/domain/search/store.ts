import type { Db } from '../../db/database.ts';
import { detectVectorColumn, type VectorColumn } from '../../db/vector-column.ts';
import type { Prisma } from '../../generated/prisma/client.ts';
import type { Viewer } from '../core/viewer.ts';
import type { CreationQuery, CreationRead } from '../creations/store.ts';
import { visibleCreations } from '../discovery/store.ts';
import type { SearchOrderBy, SortDirection } from './inputs.ts';
import { vectorStore, type VectorStore } from './vector-store.ts';

export type SortKey = number | Date;

export interface NearestQuery {
  vector: Float32Array;
  provider: string;
  viewerId: string;
  filters: { agentId?: string; userId?: string; tool?: string };
  minScore: number;
  /** The top-K window: only this many nearest creations are ranked at all. */
  window: number;
  efSearch: number;
  orderBy: SearchOrderBy;
  direction: SortDirection;
  /** A page by position, or the rows after a keyset cursor (the sort key and id of the last row seen). */
  slice: { offset: number; limit: number } | { after: { key: SortKey; id: string }; limit: number };
}

export interface NewCreation {
  id: string;
  userId: string;
  agentId: string | null;
  tool: string;
  name: string;
  url: string;
  thumbnail: string | null;
  filename: string | null;
  args: Record<string, unknown>;
  mediaAttributes: Record<string, unknown>;
  public: boolean;
  /** Unset: now. */
  createdAt?: Date;
  vector: Float32Array;
}

export interface Hit {
  id: string;
  score: number;
  /** The value the results are sorted by, for cursors. */
  key: SortKey;
}

/** What a creation's embedding is made from (creation-text.ts). */
export interface EmbeddingSource {
  id: string;
  name: string;
  args: unknown;
}

/** Which creations want a vector: those without one from the provider named `notFrom`, or all of them. */
export type EmbeddingScope = { notFrom: string } | 'all';

/** Where creations' vectors are kept and searched, with the reads that searching and importing need. */
export interface SearchStore {
  /** How this database holds vectors. */
  column(): Promise<VectorColumn>;
  /** The matches of one query: how many there are in all and the requested slice of them. */
  nearest(q: NearestQuery): Promise<{ total: number; hits: Hit[] }>;
  /** The creations among `ids` the viewer may see, in no particular order, with `query`'s relations. */
  visibleAmong<Q extends CreationQuery = object>(viewer: Viewer, ids: readonly string[], query?: Q): Promise<CreationRead<Q>[]>;
  /** Of the creations `ids`, those in `scope`. */
  toEmbedAmong(scope: EmbeddingScope, ids: readonly string[]): Promise<EmbeddingSource[]>;
  countToEmbed(scope: EmbeddingScope): Promise<number>;
  /** Up to `take` creations in `scope`, in id order, after `afterId`. */
  toEmbedAfter(scope: EmbeddingScope, afterId: string | undefined, take: number): Promise<EmbeddingSource[]>;
  /** Stores vectors (unit length) with the provider that made them, in one statement. */
  writeVectors(provider: string, rows: readonly { id: string; vector: Float32Array }[]): Promise<void>;
  /** Inserts new creations with their vectors, in one statement; ids already present are left alone. Returns the ids inserted. */
  insertWithVectors(provider: string, rows: readonly NewCreation[]): Promise<string[]>;
  /** The creators with these usernames, and whether each is an agent. */
  creatorsNamed(usernames: readonly string[]): Promise<{ username: string; id: string; isAgent: boolean }[]>;
  /** Which of these creation ids are already taken. */
  existingIds(ids: readonly string[]): Promise<Set<string>>;
}

const inScope = (scope: EmbeddingScope): Prisma.CreationWhereInput =>
  scope === 'all' ? {} : { OR: [{ embeddingProvider: null }, { embeddingProvider: { not: scope.notFrom } }] };
const source = { id: true, name: true, args: true } as const;

export function searchStore(db: Db): SearchStore {
  // How the column is held is read on first use and kept; a failed read is tried again next time.
  let vectors: Promise<VectorStore> | undefined;
  const ready = () =>
    (vectors ??= detectVectorColumn(db).then(
      (column) => vectorStore(db, column),
      (e) => {
        vectors = undefined;
        throw e;
      },
    ));

  return {
    column: async () => (await ready()).column,
    nearest: async (q) => (await ready()).nearest(q),

    async visibleAmong<Q extends CreationQuery>(viewer: Viewer, ids: readonly string[], query?: Q) {
      return (await db.creation.findMany({ ...query, where: { id: { in: [...ids] }, ...visibleCreations(viewer) } })) as CreationRead<Q>[];
    },

    toEmbedAmong: (scope, ids) => db.creation.findMany({ where: { id: { in: [...ids] }, ...inScope(scope) }, select: source }),
    countToEmbed: (scope) => db.creation.count({ where: inScope(scope) }),
    toEmbedAfter: (scope, afterId, take) =>
      db.creation.findMany({
        where: { ...inScope(scope), ...(afterId ? { id: { gt: afterId } } : {}) },
        select: source,
        orderBy: { id: 'asc' },
        take,
      }),

    writeVectors: async (provider, rows) => (await ready()).write(provider, rows),
    insertWithVectors: async (provider, rows) => (await ready()).insertWithEmbeddings(provider, rows),

    async creatorsNamed(usernames) {
      const found = await db.user.findMany({
        where: { username: { in: [...usernames] } },
        select: { id: true, username: true, agentProfile: { select: { id: true } } },
      });
      return found.map((u) => ({ username: u.username, id: u.id, isAgent: u.agentProfile !== null }));
    },

    async existingIds(ids) {
      return new Set((await db.creation.findMany({ where: { id: { in: [...ids] } }, select: { id: true } })).map((c) => c.id));
    },
  };
}
