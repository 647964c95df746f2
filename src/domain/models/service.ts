import { forbidden, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import type { Viewer } from '../core/viewer.ts';
import { isVisibleTo } from '../core/visibility.ts';
import { parseModelFilter, type modelFilterSchema, type RawFilter } from '../discovery/filters.ts';
import type { ModelQuery, ModelRead, ModelStore, ModelWindow } from './store.ts';

export function modelService(store: ModelStore) {
  return {
    /** Models the viewer may use (their own and public ones), narrowed by `filter`, newest first. */
    list(viewer: Viewer, filter: RawFilter<typeof modelFilterSchema>, window: ModelWindow) {
      return store.list(viewer, parseModelFilter(filter), window);
    },

    /** Public models are readable by everyone; a private one only by its owner. */
    async get<Q extends ModelQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<ModelRead<Q>> {
      const model = canNameARow(id) ? await store.find(id, query) : null;
      if (!model) throw notFound('Model not found');
      if (!isVisibleTo(viewer, model, model.userId)) throw forbidden('You do not have access to this model');
      return model;
    },
  };
}

export type ModelService = ReturnType<typeof modelService>;
