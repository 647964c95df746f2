import type { Db } from '../../db/database.ts';
import type { Model, Prisma } from '../../generated/prisma/client.ts';
import { newestFirst } from '../core/ordering.ts';
import type { Viewer } from '../core/viewer.ts';
import type { ModelFilter } from '../discovery/filters.ts';
import { modelListWhere } from '../discovery/store.ts';

export type { Model };

/** The relations a reader wants with a model (GraphQL's selection, REST's owner), passed through to the read. */
export type ModelQuery = { include?: Prisma.ModelInclude };
/** A model as read with `Q`: its columns and the relations `Q` includes. */
export type ModelRead<Q extends ModelQuery> = Model & Prisma.ModelGetPayload<Q>;
/** A window of the list (a connection's cursor, take and skip) with its relations. */
export type ModelWindow = Omit<Prisma.ModelFindManyArgs, 'where' | 'orderBy'>;

/** Where trained models are kept. */
export interface ModelStore {
  /** The models the viewer may use, narrowed by `filter`, newest first. */
  list(viewer: Viewer, filter: ModelFilter, window: ModelWindow): Promise<Model[]>;
  find<Q extends ModelQuery = object>(id: string, query?: Q): Promise<ModelRead<Q> | null>;
  /** A numbered page of the list (`ids`: only these), and how many the whole list has, as of one moment. */
  page<Q extends ModelQuery = object>(
    viewer: Viewer,
    filter: ModelFilter & { ids?: string[] },
    page: { skip: number; take: number },
    query?: Q,
  ): Promise<{ models: ModelRead<Q>[]; total: number }>;
  update<Q extends ModelQuery = object>(id: string, patch: { name?: string; public?: boolean }, query?: Q): Promise<ModelRead<Q>>;
}

export function modelStore(db: Db): ModelStore {
  return {
    list: (viewer, filter, window) => db.model.findMany({ ...window, where: modelListWhere(viewer, filter), orderBy: newestFirst }),

    async find<Q extends ModelQuery>(id: string, query?: Q) {
      return (await db.model.findUnique({ where: { id }, ...query })) as ModelRead<Q> | null;
    },

    page: <Q extends ModelQuery>(
      viewer: Viewer,
      { ids, ...filter }: ModelFilter & { ids?: string[] },
      page: { skip: number; take: number },
      query?: Q,
    ) => {
      const where = { AND: [modelListWhere(viewer, filter), ids ? { id: { in: ids } } : {}] };
      return db.$transaction(async (tx) => ({
        models: (await tx.model.findMany({ where, orderBy: newestFirst, ...page, ...query })) as ModelRead<Q>[],
        total: await tx.model.count({ where }),
      }));
    },

    async update<Q extends ModelQuery>(id: string, patch: { name?: string; public?: boolean }, query?: Q) {
      return (await db.model.update({ where: { id }, data: patch, ...query })) as ModelRead<Q>;
    },
  };
}
