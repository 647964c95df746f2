import { forbidden, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { nonEmptyPatch, parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { isVisibleTo } from '../core/visibility.ts';
import { parseModelFilter, type modelFilterSchema, type RawFilter } from '../discovery/filters.ts';
import { modelPageSchema, modelPatchSchema } from './inputs.ts';
import type { ModelQuery, ModelRead, ModelStore, ModelWindow } from './store.ts';

export const MODEL_NOT_FOUND = 'Model not found';

export function modelService(store: ModelStore, limits: { listPageMaxBytes: number }) {
  return {
    /** Models the viewer may use (their own and public ones), narrowed by `filter`, newest first. */
    list(viewer: Viewer, filter: RawFilter<typeof modelFilterSchema>, window: ModelWindow) {
      return store.list(viewer, parseModelFilter(filter), window);
    },

    /** Public models are readable by everyone; a private one only by its owner. */
    async get<Q extends ModelQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<ModelRead<Q>> {
      const model = canNameARow(id) ? await store.find(id, query) : null;
      if (!model) throw notFound(MODEL_NOT_FOUND);
      if (!isVisibleTo(viewer, model, model.userId)) throw forbidden('You do not have access to this model');
      return model;
    },

    /**
     * A numbered page of the models the viewer may use (their own and public ones), newest first,
     * with how many there are in all (the original's `GET /v2/models`); cut by bytes, `cut` says where.
     */
    async page<Q extends ModelQuery = object>(viewer: Viewer, raw: unknown, query?: Q) {
      const { page, limit, userId, modelId, public: isPublic } = parseInput(modelPageSchema, raw);
      const filter = { ...parseModelFilter({ owner: userId, public: isPublic }), ids: modelId?.filter(canNameARow) };
      const { models, total, cut } = await store.page(viewer, filter, { page, limit, maxBytes: limits.listPageMaxBytes }, query);
      return { models, total, page, limit, cut };
    },

    /** Renames a model or makes it public or private: its owner only; someone else's private model is not found. */
    async update<Q extends ModelQuery = object>(viewer: Viewer, id: string, raw: unknown, query?: Q): Promise<ModelRead<Q>> {
      const { deleted: _deleted, ...fields } = parseInput(modelPatchSchema, raw);
      const patch = nonEmptyPatch(fields, 'model');
      const model = canNameARow(id) ? await store.find(id) : null;
      if (!model || !isVisibleTo(viewer, model, model.userId)) throw notFound(MODEL_NOT_FOUND);
      if (model.userId !== viewer.id) throw forbidden('Only the owner of this model can change it');
      return store.update(id, patch, query);
    },
  };
}

export type ModelService = ReturnType<typeof modelService>;
