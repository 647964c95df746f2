import { badInput, DomainError, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { nonEmptyPatch, parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { parseCreationFilter, type creationFilterSchema, type RawFilter } from '../discovery/filters.ts';
import { creationBulkPatchSchema, creationPatchSchema } from './inputs.ts';
import { likedByViewerLoader } from './loaders.ts';
import type { CreationPatch, CreationQuery, CreationRead, CreationStore, CreationWindow } from './store.ts';

export type { CreationQuery } from './store.ts';

export const CREATION_NOT_FOUND = 'Creation not found or you do not have access to it';
export const LIKE_NOT_FOUND = 'Like not found';
export const NOT_CREATION_OWNER = 'Only the owner of this creation can change it';

export function creationService(store: CreationStore) {
  /**
   * Changes creations the viewer owns, all or none: one they may not see is not found, one of
   * someone else's they may see is forbidden, each named by its place in `path`.
   */
  async function change<Q extends CreationQuery>(viewer: Viewer, ids: string[], patch: CreationPatch, query?: Q, path?: string) {
    const owners = await store.ownersAmong(viewer, ids.filter(canNameARow));
    const at = (i: number) => (path ? [path, i] : undefined);
    ids.forEach((id, i) => {
      const owner = owners.get(id);
      if (owner === undefined) throw new DomainError('NOT_FOUND', CREATION_NOT_FOUND, at(i));
      if (owner !== viewer.id) throw new DomainError('FORBIDDEN', NOT_CREATION_OWNER, at(i));
    });
    return store.update(ids, patch, query);
  }

  return {
    /** The feed: public creations and the viewer's own, narrowed by `filter`, newest first. */
    list(viewer: Viewer, filter: RawFilter<typeof creationFilterSchema>, window: CreationWindow) {
      return store.list(viewer, parseCreationFilter(filter), window);
    },

    async get<Q extends CreationQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<CreationRead<Q>> {
      const creation = canNameARow(id) ? await store.findVisible(viewer, id, query) : null;
      if (!creation) throw notFound(CREATION_NOT_FOUND);
      return creation;
    },

    /** Likes a creation the viewer may see, once; the creation is returned with its new count. */
    async like<Q extends CreationQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<CreationRead<Q>> {
      const result = canNameARow(id) ? await store.like(viewer, id, query) : 'not visible';
      if (result === 'not visible') throw notFound(CREATION_NOT_FOUND);
      if (result === 'unchanged') throw badInput('Creation already liked by user');
      return result;
    },

    async unlike<Q extends CreationQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<CreationRead<Q>> {
      const result = canNameARow(id) ? await store.unlike(viewer, id, query) : 'not visible';
      if (result === 'not visible') throw notFound(CREATION_NOT_FOUND);
      if (result === 'unchanged') throw notFound(LIKE_NOT_FOUND);
      return result;
    },

    /** Renames, publishes, unpublishes or deletes a creation of the viewer's; the creation as that left it. */
    async update<Q extends CreationQuery = object>(viewer: Viewer, id: string, raw: unknown, query?: Q): Promise<CreationRead<Q>> {
      const patch = nonEmptyPatch(parseInput(creationPatchSchema, raw), 'creation');
      const [changed] = await change(viewer, [id], patch, query);
      return changed!;
    },

    /** The same change to several creations of the viewer's (`creationIds`, at most 100), all or none. */
    async updateMany<Q extends CreationQuery = object>(viewer: Viewer, raw: unknown, query?: Q): Promise<CreationRead<Q>[]> {
      const { creationIds, ...fields } = parseInput(creationBulkPatchSchema, raw);
      const patch = nonEmptyPatch(fields, 'creation');
      return change(viewer, creationIds, patch, query, 'creationIds');
    },

    /** For GraphQL's `likedByMe`: one per request, batching every creation it asks about. */
    likedByViewer: (viewer: Viewer) => likedByViewerLoader(store, viewer),
  };
}

export type CreationService = ReturnType<typeof creationService>;
