import type { Db } from '../../db/database.ts';
import type { Creation, Prisma } from '../../generated/prisma/client.ts';
import { newestFirst } from '../core/ordering.ts';
import type { Viewer } from '../core/viewer.ts';
import { leaveCollections } from '../collections/store.ts';
import type { CreationFilter } from '../discovery/filters.ts';
import { creationListWhere, visibleCreations } from '../discovery/store.ts';

export type { Creation };

/**
 * The relations a reader wants with a creation: GraphQL's selection (Pothos' `queryFromInfo`)
 * or a REST body's include. The store passes it through to the statement that reads the row,
 * so a whole selection costs the same few statements however deep it goes.
 */
export type CreationQuery = { include?: Prisma.CreationInclude };
/** A creation as read with `Q`: its columns and the relations `Q` includes. */
export type CreationRead<Q extends CreationQuery> = Creation & Prisma.CreationGetPayload<Q>;
/** A window of the feed (a connection's cursor, take and skip) with its relations. */
export type CreationWindow = Omit<Prisma.CreationFindManyArgs, 'where' | 'orderBy'>;

/** Why a like or unlike changed nothing: the creation is not there for the viewer, or the like already is (or is not). */
export type LikeRefusal = 'not visible' | 'unchanged';

/** Where creations and their likes are kept. */
export interface CreationStore {
  /** The creations the viewer may see, narrowed by `filter`, newest first. */
  list(viewer: Viewer, filter: CreationFilter, window: CreationWindow): Promise<Creation[]>;
  findVisible<Q extends CreationQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<CreationRead<Q> | null>;
  /** Adds the viewer's like and counts it, together; the creation as that left it. */
  like<Q extends CreationQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<CreationRead<Q> | LikeRefusal>;
  /** Removes the viewer's like and uncounts it, together. */
  unlike<Q extends CreationQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<CreationRead<Q> | LikeRefusal>;
  /** Which of these creations the viewer liked. */
  likedAmong(viewer: Viewer, ids: readonly string[]): Promise<Set<string>>;
  /** The owners of those of these creations the viewer may see. */
  ownersAmong(viewer: Viewer, ids: readonly string[]): Promise<Map<string, string>>;
  /**
   * Changes these creations together, in one transaction; deleting them takes them out of every
   * collection in it too. The creations as that left them, in the order named.
   */
  update<Q extends CreationQuery = object>(ids: readonly string[], patch: CreationPatch, query?: Q): Promise<CreationRead<Q>[]>;
}

/** What an owner may change of their creations. */
export interface CreationPatch {
  name?: string;
  public?: boolean;
  /** true deletes (a deleted creation is seen by no one, and leaves every collection); false changes nothing. */
  deleted?: boolean;
}

type Tx = Prisma.TransactionClient;
/** A change to the viewer's like of a creation; how many like rows it wrote (0: there was nothing to change). */
type LikeChange = (tx: Tx, viewer: Viewer, id: string) => Promise<number>;

const addLike: LikeChange = async (tx, viewer, id) =>
  (await tx.like.createMany({ data: [{ creationId: id, userId: viewer.id }], skipDuplicates: true })).count;
const removeLike: LikeChange = async (tx, viewer, id) => (await tx.like.deleteMany({ where: { creationId: id, userId: viewer.id } })).count;

/** A creation as a tool call or a task makes it (or an import brings it): the row's own columns. */
export interface MadeCreation {
  id: string;
  userId: string;
  agentId: string | null;
  tool: string;
  args: Record<string, unknown>;
  name: string;
  url: string;
  thumbnail: string | null;
  filename: string | null;
  mediaAttributes: Record<string, unknown>;
  /** A task made public makes public creations. */
  public?: boolean;
}

/**
 * Saves what a task or a tool call made, in the transaction that settles it: the call and its
 * creations are saved together or not at all.
 */
export async function recordCreations(tx: Pick<Tx, 'creation'>, taskId: string, creations: readonly MadeCreation[]) {
  if (!creations.length) return;
  await tx.creation.createMany({
    data: creations.map((c) => ({
      ...c,
      taskId,
      args: c.args as Prisma.InputJsonValue,
      mediaAttributes: c.mediaAttributes as Prisma.InputJsonValue,
    })),
  });
}

/**
 * How search's vectors are written into a creation's embedding columns: search makes them and
 * knows their form (`cast`: the column's type, pgvector's `vector` or `real[]`; each vector as
 * that type's text), this store writes the row.
 */
export interface EmbeddingColumns {
  provider: string;
  dimensions: number;
  cast: Prisma.Sql;
}

/**
 * Inserts imported creations together with their vectors, in one statement: writing the row and
 * then its vector would write every row (and its 3 KB vector) twice. Ids already present are
 * left alone; returns the ids inserted.
 */
export async function insertWithEmbeddings(
  db: Pick<Db, '$queryRaw'>,
  embedding: EmbeddingColumns,
  rows: readonly (MadeCreation & { public: boolean; createdAt?: Date; vector: string })[],
): Promise<string[]> {
  if (rows.length === 0) return [];
  const col = <K extends keyof (typeof rows)[number]>(key: K) => rows.map((r) => r[key]);
  const inserted = await db.$queryRaw<{ id: string }[]>`
    INSERT INTO "Creation" (id, "userId", "agentId", tool, name, url, thumbnail, filename, args, "mediaAttributes", public, "createdAt", "updatedAt",
                            embedding, "embeddingProvider", "embeddingDimensions")
    SELECT r.id, r.user_id, r.agent_id, r.tool, r.name, r.url, r.thumbnail, r.filename, r.args::jsonb, r.media::jsonb, r.public,
           COALESCE(r.created_at::timestamptz AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'), now() AT TIME ZONE 'UTC',
           r.embedding::${embedding.cast}, ${embedding.provider}, ${embedding.dimensions}
    FROM unnest(${col('id')}::text[], ${col('userId')}::text[], ${col('agentId')}::text[], ${col('tool')}::text[], ${col('name')}::text[],
                ${col('url')}::text[], ${col('thumbnail')}::text[], ${col('filename')}::text[],
                ${rows.map((r) => JSON.stringify(r.args))}::text[], ${rows.map((r) => JSON.stringify(r.mediaAttributes))}::text[],
                ${col('public')}::boolean[], ${rows.map((r) => r.createdAt?.toISOString() ?? null)}::text[], ${col('vector')}::text[])
      AS r(id, user_id, agent_id, tool, name, url, thumbnail, filename, args, media, public, created_at, embedding)
    ON CONFLICT (id) DO NOTHING
    RETURNING id`;
  return inserted.map((r) => r.id);
}

/** Stores vectors with the provider that made them, in one statement. */
export async function writeEmbeddings(
  db: Pick<Db, '$executeRaw'>,
  embedding: EmbeddingColumns,
  rows: readonly { id: string; vector: string }[],
) {
  if (rows.length === 0) return;
  await db.$executeRaw`
    UPDATE "Creation" AS c SET embedding = v.e::${embedding.cast}, "embeddingProvider" = ${embedding.provider}, "embeddingDimensions" = ${embedding.dimensions}
    FROM unnest(${rows.map((r) => r.id)}::text[], ${rows.map((r) => r.vector)}::text[]) AS v(id, e)
    WHERE c.id = v.id`;
}

export function creationStore(db: Db): CreationStore {
  const isVisible = async (tx: Tx, viewer: Viewer, id: string) =>
    (await tx.creation.findFirst({ where: { id, ...visibleCreations(viewer) }, select: { id: true } })) !== null;

  /**
   * The like row and `likeCount` change in one transaction, so the count always matches; a
   * refusal leaves both as they were.
   */
  const changeLike = <Q extends CreationQuery>(
    viewer: Viewer,
    id: string,
    query: Q | undefined,
    change: LikeChange,
    likeCount: Prisma.IntFieldUpdateOperationsInput,
  ) =>
    db.$transaction(async (tx): Promise<CreationRead<Q> | LikeRefusal> => {
      if (!(await isVisible(tx, viewer, id))) return 'not visible';
      if ((await change(tx, viewer, id)) === 0) return 'unchanged';
      return (await tx.creation.update({ where: { id }, data: { likeCount }, ...query })) as CreationRead<Q>;
    });

  return {
    list: (viewer, filter, window) => db.creation.findMany({ ...window, where: creationListWhere(viewer, filter), orderBy: newestFirst }),

    async findVisible<Q extends CreationQuery = object>(viewer: Viewer, id: string, query?: Q) {
      return (await db.creation.findFirst({ where: { id, ...visibleCreations(viewer) }, ...query })) as CreationRead<Q> | null;
    },

    like: (viewer, id, query) => changeLike(viewer, id, query, addLike, { increment: 1 }),
    unlike: (viewer, id, query) => changeLike(viewer, id, query, removeLike, { decrement: 1 }),

    async ownersAmong(viewer, ids) {
      const rows = await db.creation.findMany({
        where: { id: { in: [...ids] }, ...visibleCreations(viewer) },
        select: { id: true, userId: true },
      });
      return new Map(rows.map((r) => [r.id, r.userId]));
    },

    update: <Q extends CreationQuery>(ids: readonly string[], { deleted, ...patch }: CreationPatch, query?: Q) =>
      db.$transaction(async (tx) => {
        const where = { id: { in: [...ids] } };
        await tx.creation.updateMany({ where, data: { ...patch, ...(deleted ? { deleted: true } : {}) } });
        if (deleted) await leaveCollections(tx, ids);
        const rows = (await tx.creation.findMany({ where, ...query })) as CreationRead<Q>[];
        const byId = new Map(rows.map((r) => [r.id, r]));
        return ids.map((id) => byId.get(id)!);
      }),

    async likedAmong(viewer, ids) {
      const likes = await db.like.findMany({ where: { userId: viewer.id, creationId: { in: [...ids] } }, select: { creationId: true } });
      return new Set(likes.map((l) => l.creationId));
    },
  };
}
