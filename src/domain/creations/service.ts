import type { Db } from '../../db/database.ts';
import type { Creation, Prisma } from '../../generated/prisma/client.ts';
import { badInput, notFound } from '../core/errors.ts';
import { creationListWhere } from '../discovery/filters.ts';
import { canNameARow } from '../core/ids.ts';
import { newestFirst } from '../core/ordering.ts';
import type { Viewer } from '../core/viewer.ts';
import { visibleCreations } from '../core/visibility.ts';

export const CREATION_NOT_FOUND = 'Creation not found or you do not have access to it';
export const LIKE_NOT_FOUND = 'Like not found';

export type CreationQuery = { include?: Prisma.CreationInclude };

export function creationService(db: Db) {
  async function findVisible(tx: Prisma.TransactionClient | Db, viewer: Viewer, id: string) {
    const creation = canNameARow(id)
      ? await tx.creation.findFirst({ where: { id, ...visibleCreations(viewer) }, select: { id: true } })
      : null;
    if (!creation) throw notFound(CREATION_NOT_FOUND);
  }

  return {
    /** The feed: public creations and the viewer's own, narrowed by `filter`, newest first. */
    list(viewer: Viewer, filter: Parameters<typeof creationListWhere>[1], page: Omit<Prisma.CreationFindManyArgs, 'where' | 'orderBy'>) {
      return db.creation.findMany({ ...page, where: creationListWhere(viewer, filter), orderBy: newestFirst });
    },

    async get(viewer: Viewer, id: string, query: CreationQuery = {}): Promise<Creation> {
      const creation = canNameARow(id) ? await db.creation.findFirst({ where: { id, ...visibleCreations(viewer) }, ...query }) : null;
      if (!creation) throw notFound(CREATION_NOT_FOUND);
      return creation;
    },

    /**
     * The like row and `likeCount` change in one transaction, so the count always matches;
     * the creation is returned as that transaction left it.
     */
    like(viewer: Viewer, id: string, query: CreationQuery = {}): Promise<Creation> {
      return db.$transaction(async (tx) => {
        await findVisible(tx, viewer, id);
        const { count } = await tx.like.createMany({ data: [{ creationId: id, userId: viewer.id }], skipDuplicates: true });
        if (count === 0) throw badInput('Creation already liked by user');
        return tx.creation.update({ where: { id }, data: { likeCount: { increment: 1 } }, ...query });
      });
    },

    unlike(viewer: Viewer, id: string, query: CreationQuery = {}): Promise<Creation> {
      return db.$transaction(async (tx) => {
        await findVisible(tx, viewer, id);
        const { count } = await tx.like.deleteMany({ where: { creationId: id, userId: viewer.id } });
        if (count === 0) throw notFound(LIKE_NOT_FOUND);
        return tx.creation.update({ where: { id }, data: { likeCount: { decrement: 1 } }, ...query });
      });
    },
  };
}

export type CreationService = ReturnType<typeof creationService>;
