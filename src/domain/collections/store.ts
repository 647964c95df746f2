import type { Db } from '../../db/database.ts';
import { type Collection, type Creation, Prisma } from '../../generated/prisma/client.ts';
import { rowsThatFit } from '../core/byte-pages.ts';
import { newIds } from '../core/ids.ts';
import type { Viewer } from '../core/viewer.ts';
import { visibleCreations, visibleToFilter } from '../discovery/store.ts';
import type { CollectionPatch } from './inputs.ts';

export type { Collection };

/** The relations a reader wants with a collection (GraphQL's selection, REST's owner), passed through to the read. */
export type CollectionQuery = { include?: Prisma.CollectionInclude };
/** A collection as read with `Q`: its columns and the relations `Q` includes. */
export type CollectionRead<Q extends CollectionQuery> = Collection & Prisma.CollectionGetPayload<Q>;
/** The relations a reader wants with each creation of a page. */
export type ShownCreationQuery = { include?: Prisma.CreationInclude };
export type ShownCreation<Q extends ShownCreationQuery> = Creation & Prisma.CreationGetPayload<Q>;

/** Whose collection, for the rules that depend on it. */
export type CollectionOwner = Pick<Collection, 'id' | 'userId'>;
/** How many creations a collection shows its reader, and the first of them (its cover). */
export interface CollectionSummary {
  count: number;
  coverId: string | null;
}
/** A collection as the owner's picker lists it: the ids of the creations it holds for them. */
export interface LightCollection {
  id: string;
  name: string;
  public: boolean;
  creationIds: string[];
}
/** Where a page starts (the position of the row before it), how many rows, and how many bytes at most. */
export interface PageWindow {
  after: string | null;
  take: number;
  maxBytes: number;
}

/** Where collections and the creations in them are kept. */
export interface CollectionStore {
  find<Q extends CollectionQuery = object>(id: string, query?: Q): Promise<CollectionRead<Q> | null>;
  /** Creates a collection holding these creations (in this order), unless its owner has `cap` already: then null. */
  create<Q extends CollectionQuery = object>(
    ownerId: string,
    input: { name: string; description: string; public: boolean },
    creationIds: string[],
    cap: number,
    query?: Q,
  ): Promise<CollectionRead<Q> | null>;
  update<Q extends CollectionQuery = object>(id: string, patch: CollectionPatch, query?: Q): Promise<CollectionRead<Q>>;
  delete(id: string): Promise<void>;
  /** Which of these creations `owner` may put in a collection (`canHold`). */
  holdable(owner: Viewer, ids: readonly string[]): Promise<Set<string>>;
  /**
   * Adds the creations not in the collection yet, those the owner may still hold, after the
   * others; 'full' (and nothing added) when it would then hold more than `cap`.
   */
  add(id: string, owner: Viewer, creationIds: readonly string[], cap: number): Promise<number | 'full'>;
  /** Takes these creations out; how many were in. */
  remove(id: string, creationIds: readonly string[]): Promise<number>;
  /** A page of the creations the collection shows `viewer` (`isShownIn`), in the order they were added. */
  shown<Q extends ShownCreationQuery>(
    viewer: Viewer,
    collection: CollectionOwner,
    window: PageWindow,
    query: Q,
  ): Promise<{ items: { position: string; creation: ShownCreation<Q> }[]; more: boolean }>;
  /** Count and cover of each collection as `viewer` sees it, in one statement. */
  summaries(viewer: Viewer, collections: readonly CollectionOwner[]): Promise<Map<string, CollectionSummary>>;
  /** The owner's collections, newest first, each with the creations it shows them. */
  light(ownerId: string, window: PageWindow): Promise<{ collections: LightCollection[]; more: boolean }>;
}

/**
 * `isShownIn` (rules.ts) as SQL, for the "Creation" row `c` of an item of a collection whose
 * owner is known: a reader who owns the collection sees their own private creations in it too.
 */
export function shownSql(viewerId: string, ownerId: string): Prisma.Sql {
  return viewerId === ownerId
    ? Prisma.sql`c."deleted" = false AND (c."public" OR c."userId" = ${viewerId})`
    : Prisma.sql`c."deleted" = false AND c."public"`;
}

/** `isShownIn` as a Prisma filter on the items of any collection (its owner read from the item's collection). */
export const shownItems = (viewer: Viewer): Prisma.CollectionCreationWhereInput => ({
  creation: { deleted: false },
  OR: [{ creation: { public: true } }, { creation: { userId: viewer.id }, collection: { userId: viewer.id } }],
});

/** `canReadCollection` as a Prisma filter. */
export const readableCollections = (viewer: Viewer): Prisma.CollectionWhereInput => visibleToFilter(viewer, 'userId');

/**
 * Bytes a creation adds to a page, roughly as REST writes it: its text, its arguments, its task's
 * arguments, result and error (`t`, the task joined; else the arguments again, as the stand-in), the rest.
 */
const CREATION_BYTES = Prisma.sql`octet_length(c."name") + octet_length(c."url") + coalesce(octet_length(c."thumbnail"), 0)
  + coalesce(octet_length(c."filename"), 0) + octet_length(c."args"::text) + octet_length(c."mediaAttributes"::text) + 1000
  + coalesce(octet_length(t."args"::text) + coalesce(octet_length(t."result"::text), 0) + coalesce(octet_length(t."error"), 0),
    octet_length(c."args"::text))`;
/** An id in a light list: the id and its quotes and comma. */
const ID_BYTES = 40;

type Tx = Prisma.TransactionClient;

/** Of these creations, those `owner` may still hold, read inside the write: one made private meanwhile is left out. */
async function stillHoldable(tx: Tx, owner: Viewer, ids: readonly string[]) {
  if (!ids.length) return [];
  const found = await tx.creation.findMany({ where: { id: { in: [...ids] }, ...visibleCreations(owner) }, select: { id: true } });
  const allowed = new Set(found.map((c) => c.id));
  return ids.filter((id) => allowed.has(id));
}

/** Inserts the items in the order given, each id after the one before (see `newIds`). */
const insertItems = (tx: Tx, collectionId: string, creationIds: readonly string[]) => {
  const ids = newIds(creationIds.length);
  return tx.collectionCreation.createMany({
    data: creationIds.map((creationId, i) => ({ id: ids[i]!, collectionId, creationId })),
    skipDuplicates: true,
  });
};

/**
 * Takes these creations out of every collection, inside the transaction of the creations'
 * owner that deletes them: a deleted creation is in no one's collection.
 */
export const leaveCollections = (tx: Tx, creationIds: readonly string[]) =>
  tx.collectionCreation.deleteMany({ where: { creationId: { in: [...creationIds] } } });

export function collectionStore(db: Db): CollectionStore {
  return {
    async find<Q extends CollectionQuery>(id: string, query?: Q) {
      return (await db.collection.findUnique({ where: { id }, ...query })) as CollectionRead<Q> | null;
    },

    // One user's new collections queue on their row, so concurrent ones cannot pass the cap.
    create: (ownerId, input, creationIds, cap, query) =>
      db.$transaction(async (tx) => {
        await tx.$queryRaw`SELECT 1 FROM "User" WHERE "id" = ${ownerId} FOR UPDATE`;
        if ((await tx.collection.count({ where: { userId: ownerId } })) >= cap) return null;
        const created = await tx.collection.create({ data: { ...input, userId: ownerId } });
        const held = await stillHoldable(tx, { id: ownerId }, creationIds);
        if (held.length) await insertItems(tx, created.id, held);
        return (await tx.collection.findUniqueOrThrow({ where: { id: created.id }, ...query })) as never;
      }),

    async update<Q extends CollectionQuery>(id: string, patch: CollectionPatch, query?: Q) {
      return (await db.collection.update({ where: { id }, data: patch, ...query })) as CollectionRead<Q>;
    },

    async delete(id) {
      await db.collection.deleteMany({ where: { id } });
    },

    async holdable(owner, ids) {
      const found = await db.creation.findMany({ where: { id: { in: [...ids] }, ...visibleCreations(owner) }, select: { id: true } });
      return new Set(found.map((c) => c.id));
    },

    // The collection's row is locked, so adds to one collection count and insert one after another.
    add: (id, owner, creationIds, cap) =>
      db.$transaction(async (tx) => {
        await tx.$queryRaw`SELECT 1 FROM "Collection" WHERE "id" = ${id} FOR UPDATE`;
        const present = await tx.collectionCreation.findMany({
          where: { collectionId: id, creationId: { in: [...creationIds] } },
          select: { creationId: true },
        });
        const isIn = new Set(present.map((p) => p.creationId));
        const fresh = await stillHoldable(
          tx,
          owner,
          creationIds.filter((c) => !isIn.has(c)),
        );
        if (!fresh.length) return 0;
        if ((await tx.collectionCreation.count({ where: { collectionId: id } })) + fresh.length > cap) return 'full' as const;
        const { count } = await insertItems(tx, id, fresh);
        await tx.collection.update({ where: { id }, data: { updatedAt: new Date() } });
        return count;
      }),

    remove: (id, creationIds) =>
      db.$transaction(async (tx) => {
        const { count } = await tx.collectionCreation.deleteMany({ where: { collectionId: id, creationId: { in: [...creationIds] } } });
        if (count) await tx.collection.update({ where: { id }, data: { updatedAt: new Date() } });
        return count;
      }),

    async shown<Q extends ShownCreationQuery>(viewer: Viewer, collection: CollectionOwner, window: PageWindow, query: Q) {
      const rows = await db.$queryRaw<{ position: string; creationId: string; bytes: number }[]>`
        SELECT cc."id" AS "position", cc."creationId", (${CREATION_BYTES})::int AS "bytes"
        FROM "CollectionCreation" cc JOIN "Creation" c ON c."id" = cc."creationId" LEFT JOIN "Task" t ON t."id" = c."taskId"
        WHERE cc."collectionId" = ${collection.id} AND ${shownSql(viewer.id, collection.userId)}
          ${window.after === null ? Prisma.empty : Prisma.sql`AND cc."id" > ${window.after}`}
        ORDER BY cc."id" LIMIT ${window.take + 1}`;
      const fit = rowsThatFit(
        rows.map((r) => Number(r.bytes)),
        window.take,
        window.maxBytes,
      );
      const kept = rows.slice(0, fit);
      const creations = kept.length ? await db.creation.findMany({ where: { id: { in: kept.map((r) => r.creationId) } }, ...query }) : [];
      const byId = new Map(creations.map((c) => [c.id, c as ShownCreation<Q>]));
      // A creation deleted between the two reads is left out rather than shown half.
      const items = kept.flatMap((r) => (byId.has(r.creationId) ? [{ position: r.position, creation: byId.get(r.creationId)! }] : []));
      return { items, more: rows.length > fit };
    },

    async summaries(viewer, collections) {
      const out = new Map<string, CollectionSummary>(collections.map((c) => [c.id, { count: 0, coverId: null }]));
      if (!collections.length) return out;
      const rows = await db.$queryRaw<{ collectionId: string; coverId: string; count: bigint }[]>`
        SELECT DISTINCT ON (cc."collectionId") cc."collectionId", cc."creationId" AS "coverId",
          count(*) OVER (PARTITION BY cc."collectionId") AS "count"
        FROM "CollectionCreation" cc
          JOIN "Creation" c ON c."id" = cc."creationId"
          JOIN "Collection" col ON col."id" = cc."collectionId"
        WHERE cc."collectionId" IN (${Prisma.join(collections.map((c) => c.id))})
          AND c."deleted" = false AND (c."public" OR (c."userId" = ${viewer.id} AND col."userId" = ${viewer.id}))
        ORDER BY cc."collectionId", cc."id"`;
      for (const r of rows) out.set(r.collectionId, { count: Number(r.count), coverId: r.coverId });
      return out;
    },

    async light(ownerId, window) {
      const rows = await db.$queryRaw<{ id: string; name: string; public: boolean; bytes: number }[]>`
        SELECT col."id", col."name", col."public",
          (octet_length(col."name") + 100 + ${ID_BYTES} * count(c."id"))::int AS "bytes"
        FROM "Collection" col
          LEFT JOIN "CollectionCreation" cc ON cc."collectionId" = col."id"
          LEFT JOIN "Creation" c ON c."id" = cc."creationId" AND ${shownSql(ownerId, ownerId)}
        WHERE col."userId" = ${ownerId} ${window.after === null ? Prisma.empty : Prisma.sql`AND col."id" < ${window.after}`}
        GROUP BY col."id" ORDER BY col."id" DESC LIMIT ${window.take + 1}`;
      const fit = rowsThatFit(
        rows.map((r) => Number(r.bytes)),
        window.take,
        window.maxBytes,
      );
      const kept = rows.slice(0, fit);
      const items = kept.length
        ? await db.$queryRaw<{ collectionId: string; creationId: string }[]>`
            SELECT cc."collectionId", cc."creationId" FROM "CollectionCreation" cc JOIN "Creation" c ON c."id" = cc."creationId"
            WHERE cc."collectionId" IN (${Prisma.join(kept.map((r) => r.id))}) AND ${shownSql(ownerId, ownerId)}
            ORDER BY cc."id"`
        : [];
      const ids = new Map<string, string[]>(kept.map((r) => [r.id, []]));
      for (const item of items) ids.get(item.collectionId)!.push(item.creationId);
      return {
        collections: kept.map((r) => ({ id: r.id, name: r.name, public: r.public, creationIds: ids.get(r.id)! })),
        more: rows.length > fit,
      };
    },
  };
}
