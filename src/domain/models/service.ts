import type { Db } from '../../db/database.ts';
import type { Model, Prisma } from '../../generated/prisma/client.ts';
import { forbidden, notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import type { Viewer } from '../core/viewer.ts';
import { modelListWhere } from '../discovery/filters.ts';
import { newestFirst } from '../core/ordering.ts';
import { isVisibleTo } from '../core/visibility.ts';

export type ModelQuery = { include?: Prisma.ModelInclude };

export function modelService(db: Db) {
  return {
    /** Models the viewer may use (their own and public ones), narrowed by `filter`, newest first. */
    list(viewer: Viewer, filter: Parameters<typeof modelListWhere>[1], page: Omit<Prisma.ModelFindManyArgs, 'where' | 'orderBy'>) {
      return db.model.findMany({ ...page, where: modelListWhere(viewer, filter), orderBy: newestFirst });
    },

    /** Public models are readable by everyone; a private one only by its owner. */
    async get(viewer: Viewer, id: string, query: ModelQuery = {}): Promise<Model> {
      const model = canNameARow(id) ? await db.model.findUnique({ where: { id }, ...query }) : null;
      if (!model) throw notFound('Model not found');
      if (!isVisibleTo(viewer, model, model.userId)) throw forbidden('You do not have access to this model');
      return model;
    },
  };
}

export type ModelService = ReturnType<typeof modelService>;
