import { badInput, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import type { Viewer } from '../core/viewer.ts';
import { parseCreationFilter, type creationFilterSchema, type RawFilter } from '../discovery/filters.ts';
import { likedByViewerLoader } from './loaders.ts';
import type { CreationQuery, CreationRead, CreationStore, CreationWindow } from './store.ts';

export type { CreationQuery } from './store.ts';

export const CREATION_NOT_FOUND = 'Creation not found or you do not have access to it';
export const LIKE_NOT_FOUND = 'Like not found';

export function creationService(store: CreationStore) {
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

    /** For GraphQL's `likedByMe`: one per request, batching every creation it asks about. */
    likedByViewer: (viewer: Viewer) => likedByViewerLoader(store, viewer),
  };
}

export type CreationService = ReturnType<typeof creationService>;
