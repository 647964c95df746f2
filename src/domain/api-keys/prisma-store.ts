import type { Db } from '../../db/database.ts';
import { recordSignal } from '../signals/prisma-store.ts';
import type { ApiKeyStore, StoredKey } from './store.ts';

export function prismaApiKeyStore(db: Db): ApiKeyStore {
  return {
    // A plain join: the relation read Prisma writes builds a JSON object per row, and every
    // request comes through here.
    async keys(ids) {
      const rows = await db.$queryRaw<StoredKey[]>`
        SELECT k."id", k."userId", k."hash", u."subscriptionTier" AS "tier"
        FROM "ApiKey" AS k JOIN "User" AS u ON u."id" = k."userId" WHERE k."id" = ANY(${ids}::text[])`;
      return new Map(rows.map((r) => [r.id, r]));
    },

    async create(key) {
      await db.apiKey.create({ data: key });
    },

    delete: (id, userId, signal) =>
      db.$transaction(async (tx) => {
        const { count } = await tx.apiKey.deleteMany({ where: { id, userId } });
        return count ? recordSignal(tx, signal) : null;
      }),
  };
}
