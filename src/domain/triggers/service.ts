import type { Db } from '../../db/database.ts';
import type { Prisma } from '../../generated/prisma/client.ts';
import { newestFirst } from '../ordering.ts';
import type { Viewer } from '../viewer.ts';

export type TriggerQuery = { include?: Prisma.TriggerInclude };

export function triggerService(db: Db) {
  return {
    /** Triggers of every agent the caller owns, newest first. */
    listMine(viewer: Viewer, query: TriggerQuery = {}) {
      return db.trigger.findMany({ where: { agent: { ownerId: viewer.id } }, orderBy: newestFirst, ...query });
    },
  };
}

export type TriggerService = ReturnType<typeof triggerService>;
