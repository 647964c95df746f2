import type { Db } from '../../db/database.ts';
import type { WatchAccessStore } from './store.ts';

/** Sessions per statement at most: bounds the size of a re-check's `IN` list. */
const CHUNK = 1_000;
const chunks = <T>(items: T[]) =>
  Array.from({ length: Math.ceil(items.length / CHUNK) }, (_, i) => items.slice(i * CHUNK, (i + 1) * CHUNK));

export function prismaWatchAccessStore(db: Db): WatchAccessStore {
  return {
    async existingKeys(ids) {
      const rows = await db.apiKey.findMany({ where: { id: { in: [...ids] } }, select: { id: true } });
      return new Set(rows.map((r) => r.id));
    },

    async members(sessionIds, userIds) {
      const members = new Map<string, Set<string>>();
      for (const ids of chunks(sessionIds)) {
        const rows = await db.session.findMany({
          where: { id: { in: ids } },
          select: { id: true, ownerId: true, users: { where: { userId: { in: userIds } }, select: { userId: true } } },
        });
        for (const s of rows) members.set(s.id, new Set([s.ownerId, ...s.users.map((u) => u.userId)]));
      }
      return members;
    },
  };
}
