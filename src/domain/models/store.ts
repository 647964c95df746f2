import type { Db } from '../../db/database.ts';
import { type Model, Prisma } from '../../generated/prisma/client.ts';
import { type NumberedCut, type NumberedWindow, numberedByBytes } from '../core/byte-pages.ts';
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
  /**
   * A numbered page of the list (`ids`: only these) cut by bytes (`numberedCut`), how many the
   * whole list has and where the page falls in it, as of one moment.
   */
  page<Q extends ModelQuery = object>(
    viewer: Viewer,
    filter: ModelFilter & { ids?: string[] },
    window: NumberedWindow,
    query?: Q,
  ): Promise<{ models: ModelRead<Q>[]; total: number; cut: NumberedCut }>;
  update<Q extends ModelQuery = object>(id: string, patch: { name?: string; public?: boolean }, query?: Q): Promise<ModelRead<Q>>;
}

/** Bytes a model adds to a page, roughly as REST writes it: its text, its arguments twice (its own, its training task's), the rest. */
const MODEL_BYTES = Prisma.sql`2 * octet_length("name") + octet_length("baseModel") + coalesce(octet_length("checkpoint"), 0)
  + coalesce(octet_length("thumbnail"), 0) + coalesce(octet_length("loraTriggerText"), 0) + 2 * octet_length("args"::text) + 1000`;

export function modelStore(db: Db): ModelStore {
  return {
    list: (viewer, filter, window) => db.model.findMany({ ...window, where: modelListWhere(viewer, filter), orderBy: newestFirst }),

    async find<Q extends ModelQuery>(id: string, query?: Q) {
      return (await db.model.findUnique({ where: { id }, ...query })) as ModelRead<Q> | null;
    },

    page: <Q extends ModelQuery>(
      viewer: Viewer,
      { ids, ...filter }: ModelFilter & { ids?: string[] },
      window: NumberedWindow,
      query?: Q,
    ) => {
      const where = { AND: [modelListWhere(viewer, filter), ids ? { id: { in: ids } } : {}] };
      return db.$transaction(async (tx) => {
        const { rows, total, cut } = await numberedByBytes(window, {
          ids: async () => (await tx.model.findMany({ where, orderBy: newestFirst, select: { id: true } })).map((m) => m.id),
          sizes: async (all) =>
            new Map(
              (
                await tx.$queryRaw<{ id: string; bytes: number }[]>`SELECT "id", (${MODEL_BYTES})::int AS "bytes" FROM "Model"
                WHERE "id" = ANY(${all}::text[])`
              ).map((r) => [r.id, Number(r.bytes)]),
            ),
          rows: async (pageIds) => (await tx.model.findMany({ where: { id: { in: pageIds } }, ...query })) as ModelRead<Q>[],
        });
        return { models: rows, total, cut };
      });
    },

    async update<Q extends ModelQuery>(id: string, patch: { name?: string; public?: boolean }, query?: Q) {
      return (await db.model.update({ where: { id }, data: patch, ...query })) as ModelRead<Q>;
    },
  };
}
