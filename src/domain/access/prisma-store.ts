import type { Db } from '../../db/database.ts';
import type { Permission } from './service.ts';
import type { AccessStore, WatchAccessStore } from './store.ts';

/** Sessions per statement at most: bounds the size of a re-check's `IN` list. */
const CHUNK = 1_000;
const chunks = <T>(items: T[]) =>
  Array.from({ length: Math.ceil(items.length / CHUNK) }, (_, i) => items.slice(i * CHUNK, (i + 1) * CHUNK));

/** Where callers stand in sessions, for every ask that arrived together in one statement. */
export function prismaAccessStore(db: Db): AccessStore {
  return {
    async places(asks) {
      const rows = await db.$queryRaw<{ session_id: string; user_id: string; owner_id: string; permission: Permission | null }[]>`
        SELECT v.session_id, v.user_id, s."ownerId" AS owner_id, su."permission"::text AS permission
        FROM unnest(${asks.map((a) => a.sessionId)}::text[], ${asks.map((a) => a.userId)}::text[]) AS v(session_id, user_id)
        JOIN "Session" AS s ON s."id" = v.session_id
        LEFT JOIN "SessionUser" AS su ON su."sessionId" = v.session_id AND su."userId" = v.user_id`;
      const found = new Map(rows.map((r) => [`${r.session_id} ${r.user_id}`, r.owner_id === r.user_id ? 'owner' : r.permission]));
      const places = new Map<(typeof asks)[number], { permission: Permission | null }>();
      for (const a of asks) {
        const permission = found.get(`${a.sessionId} ${a.userId}`);
        if (permission !== undefined) places.set(a, { permission });
      }
      return places;
    },
  };
}

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
