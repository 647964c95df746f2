import type { CollectionsConfig } from '../../config.ts';
import { decodeCursor, encodeCursor, pageSchema } from '../core/cursors.ts';
import { badInput, DomainError, forbidden, notFound, unprocessable } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { nonEmptyPatch, parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { collectionChangeSchema, collectionCreateSchema, collectionPatchSchema, lightPageSchema } from './inputs.ts';
import { canReadCollection } from './rules.ts';
import type { CollectionOwner, CollectionQuery, CollectionRead, CollectionStore, CollectionSummary, ShownCreationQuery } from './store.ts';

export type { CollectionQuery, CollectionRead, CollectionSummary } from './store.ts';

export const COLLECTION_NOT_FOUND = 'Collection not found';
export const NOT_COLLECTION_OWNER = 'Only the owner of this collection can change it';

/** A position in a collection (an item's id) or in a user's list of collections (a collection's id). */
const positionCursor = (kind: string) => ({
  encode: (position: string) => encodeCursor(kind, position),
  decode: (cursor: string) => decodeCursor(kind, cursor, (v) => (/^[0-9a-f-]{36}$/.test(v) ? v : null)),
});
const itemCursor = positionCursor('coli');
const lightCursor = positionCursor('coll');

/** A page of a collection's creations: 20 unless told, at most 100. */
const pageArgs = (page: { first?: unknown; after?: unknown } | undefined, schema: typeof pageSchema = pageSchema) =>
  parseInput(schema, Object.fromEntries(Object.entries(page ?? {}).filter(([, v]) => v != null)));

/**
 * Collections: a user's named sets of creations. The owner changes them; anyone reads a public
 * one, only the owner a private one (others are told it is not there); what a reader sees inside
 * is decided by `isShownIn` (rules.ts), which the store applies to pages, counts and covers alike.
 */
export function collectionService(store: CollectionStore, limits: CollectionsConfig) {
  /** The collection, when the viewer may read it; a private one of someone else is "not found". */
  async function readable<Q extends CollectionQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<CollectionRead<Q>> {
    const collection = canNameARow(id) ? await store.find(id, query) : null;
    if (!collection || !canReadCollection(viewer, collection)) throw notFound(COLLECTION_NOT_FOUND);
    return collection;
  }

  /** The collection, when the viewer owns it. */
  async function owned(viewer: Viewer, id: string): Promise<CollectionOwner> {
    const collection = await readable(viewer, id);
    if (collection.userId !== viewer.id) throw forbidden(NOT_COLLECTION_OWNER);
    return collection;
  }

  /** Every creation named must be one the owner may see: the first that is not is refused by its place in the list. */
  async function checkHoldable(owner: Viewer, ids: string[]) {
    const holdable = await store.holdable(owner, ids.filter(canNameARow));
    const missing = ids.findIndex((id) => !holdable.has(id));
    if (missing >= 0)
      throw new DomainError('BAD_USER_INPUT', 'creation not found or you do not have access to it', ['creationIds', missing]);
  }

  const tooMany = () => badInput(`a collection holds at most ${limits.maxCreations} creations`, ['creationIds']);

  return {
    get: readable,

    async create<Q extends CollectionQuery = object>(viewer: Viewer, raw: unknown, query?: Q): Promise<CollectionRead<Q>> {
      const { creationIds, ...fields } = parseInput(collectionCreateSchema, raw);
      if (creationIds.length > limits.maxCreations) throw tooMany();
      await checkHoldable(viewer, creationIds);
      const created = await store.create(viewer.id, fields, creationIds, limits.maxPerUser, query);
      if (!created) throw unprocessable(`Collection limit reached: a user may own at most ${limits.maxPerUser} collections`);
      return created;
    },

    /** Only the fields sent change. */
    async update<Q extends CollectionQuery = object>(viewer: Viewer, id: string, raw: unknown, query?: Q): Promise<CollectionRead<Q>> {
      const patch = nonEmptyPatch(parseInput(collectionPatchSchema, raw), 'collection');
      await owned(viewer, id);
      return store.update(id, patch, query);
    },

    async delete(viewer: Viewer, id: string): Promise<void> {
      await owned(viewer, id);
      await store.delete(id);
    },

    /** Adds creations the owner may see; one already in stays once. Returns how many went in. */
    async add(viewer: Viewer, id: string, raw: unknown): Promise<number> {
      const { creationIds } = parseInput(collectionChangeSchema, raw);
      await owned(viewer, id);
      await checkHoldable(viewer, creationIds);
      const added = await store.add(id, viewer, creationIds, limits.maxCreations);
      if (added === 'full') throw tooMany();
      return added;
    },

    /** Takes creations out; naming one that is not in changes nothing. Returns how many were in. */
    async remove(viewer: Viewer, id: string, raw: unknown): Promise<number> {
      const { creationIds } = parseInput(collectionChangeSchema, raw);
      await owned(viewer, id);
      return store.remove(id, creationIds.filter(canNameARow));
    },

    /**
     * A page of the creations a collection shows the viewer, in the order they were added, within
     * the page's byte budget (at least one); `nextCursor` goes on from there.
     */
    async creations<Q extends ShownCreationQuery>(
      viewer: Viewer,
      collection: CollectionOwner,
      page: { first?: unknown; after?: unknown } | undefined,
      query: Q,
    ) {
      const { first, after } = pageArgs(page);
      const window = { after: after ? itemCursor.decode(after) : null, take: first, maxBytes: limits.pageMaxBytes };
      const { items, more } = await store.shown(viewer, collection, window, query);
      const last = items.at(-1);
      return { creations: items.map((i) => i.creation), nextCursor: more && last ? itemCursor.encode(last.position) : null };
    },

    /** How many creations each collection shows the viewer, and its cover (the first of them). */
    summaries: (viewer: Viewer, collections: readonly CollectionOwner[]): Promise<Map<string, CollectionSummary>> =>
      store.summaries(viewer, collections),

    /** The caller's collections, newest first, each with the ids of the creations it holds (for a picker). */
    async light(viewer: Viewer, page: { first?: unknown; after?: unknown } | undefined) {
      const { first, after } = pageArgs(page, lightPageSchema);
      const window = { after: after ? lightCursor.decode(after) : null, take: first, maxBytes: limits.pageMaxBytes };
      const { collections, more } = await store.light(viewer.id, window);
      const last = collections.at(-1);
      return { collections, nextCursor: more && last ? lightCursor.encode(last.id) : null };
    },
  };
}

export type CollectionService = ReturnType<typeof collectionService>;
