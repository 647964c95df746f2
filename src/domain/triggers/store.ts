import type { Db } from '../../db/database.ts';
import type { Prisma, Trigger } from '../../generated/prisma/client.ts';
import { newestFirst } from '../core/ordering.ts';

/** The relations a reader wants with a trigger (GraphQL's selection), passed through to the read. */
export type TriggerQuery = { include?: Prisma.TriggerInclude };
/** A trigger as read with `Q`: its columns and the relations `Q` includes. */
export type TriggerRead<Q extends TriggerQuery> = Trigger & Prisma.TriggerGetPayload<Q>;

/** Where agents' scheduled prompts are kept. */
export interface TriggerStore {
  /** One trigger of an agent `ownerId` owns. */
  findOwned<Q extends TriggerQuery = object>(ownerId: string, id: string, query?: Q): Promise<TriggerRead<Q> | null>;
  /** The triggers of every agent `ownerId` owns, newest first. */
  listOwned<Q extends TriggerQuery = object>(ownerId: string, query?: Q): Promise<TriggerRead<Q>[]>;
}

export function triggerStore(db: Db): TriggerStore {
  return {
    async findOwned<Q extends TriggerQuery>(ownerId: string, id: string, query?: Q) {
      return (await db.trigger.findFirst({ where: { id, agent: { ownerId } }, ...query })) as TriggerRead<Q> | null;
    },

    async listOwned<Q extends TriggerQuery>(ownerId: string, query?: Q) {
      return (await db.trigger.findMany({ where: { agent: { ownerId } }, orderBy: newestFirst, ...query })) as TriggerRead<Q>[];
    },
  };
}
