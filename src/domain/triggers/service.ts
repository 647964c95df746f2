import { notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import type { Viewer } from '../core/viewer.ts';
import type { TriggerQuery, TriggerRead, TriggerStore } from './store.ts';

export function triggerService(store: TriggerStore) {
  return {
    /** One trigger, for the owner of its agent only. */
    async get<Q extends TriggerQuery = object>(viewer: Viewer, id: string, query?: Q): Promise<TriggerRead<Q>> {
      const row = canNameARow(id) ? await store.findOwned(viewer.id, id, query) : null;
      if (!row) throw notFound('Trigger not found');
      return row;
    },

    /** Triggers of every agent the caller owns, newest first. */
    listMine<Q extends TriggerQuery = object>(viewer: Viewer, query?: Q): Promise<TriggerRead<Q>[]> {
      return store.listOwned(viewer.id, query);
    },
  };
}

export type TriggerService = ReturnType<typeof triggerService>;
