import type { Db } from '../../db/database.ts';
import type { Prisma } from '../../generated/prisma/client.ts';
import { notFound } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { newestFirst } from '../core/ordering.ts';
import type { Viewer } from '../core/viewer.ts';

export type TriggerQuery = { include?: Prisma.TriggerInclude };

export function triggerService(db: Db) {
  return {
    /** One trigger, for the owner of its agent only. */
    async get(viewer: Viewer, id: string, query: TriggerQuery = {}) {
      const row = canNameARow(id) ? await db.trigger.findFirst({ where: { id, agent: { ownerId: viewer.id } }, ...query }) : null;
      if (!row) throw notFound('Trigger not found');
      return row;
    },

    /** Triggers of every agent the caller owns, newest first. */
    listMine(viewer: Viewer, query: TriggerQuery = {}) {
      return db.trigger.findMany({ where: { agent: { ownerId: viewer.id } }, orderBy: newestFirst, ...query });
    },
  };
}

export type TriggerService = ReturnType<typeof triggerService>;
