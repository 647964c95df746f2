import type { Db } from '../../db/database.ts';
import { badInput, notFound, unauthenticated } from '../core/errors.ts';
import type { SignalOutbox } from '../sessions/signals.ts';
import type { Viewer } from '../core/viewer.ts';
import { coalesced } from '../core/coalesce.ts';
import { generateKey, parseKey, secretMatches } from './secret.ts';

export const KEY_NOT_FOUND = 'API key not found';

/**
 * `signals` carries a deleted key's revocation to every instance (closing what was opened with
 * it), written with the deletion so that it arrives even if the event bus was out of reach.
 */
export function apiKeyService(db: Db, signals: Pick<SignalOutbox, 'record' | 'deliver'>) {
  // Every request comes through here: a primary-key read joined to the user, with the reads of
  // requests that arrive together in one statement (a plain join: the relation read Prisma writes
  // builds a JSON object per row).
  const keyRows = coalesced(async (ids: readonly string[]) => {
    const rows = await db.$queryRaw<{ id: string; userId: string; hash: string; tier: string }[]>`
      SELECT k."id", k."userId", k."hash", u."subscriptionTier" AS "tier"
      FROM "ApiKey" AS k JOIN "User" AS u ON u."id" = k."userId" WHERE k."id" = ANY(${ids}::text[])`;
    return new Map(rows.map((r) => [r.id, r]));
  });

  return {
    /** Issues a key for a user; the plaintext is returned here and never again. */
    async create(userId: string): Promise<{ id: string; apiKey: string }> {
      const key = generateKey();
      await db.apiKey.create({ data: { id: key.id, userId, hash: key.hash, preview: key.preview } });
      return { id: key.id, apiKey: key.plaintext };
    },

    /**
     * Resolves a key to its user, reading the database every time so that a deleted key fails
     * on the very next request. Throws UNAUTHENTICATED for a missing or bad key.
     */
    async authenticate(plaintext: string | undefined | null): Promise<Viewer> {
      if (!plaintext) throw unauthenticated('Missing API key: send it in the X-Api-Key header');
      const parsed = parseKey(plaintext);
      const row = parsed ? await keyRows.load(parsed.id) : null;
      if (!parsed || !row || !secretMatches(parsed.secret, row.hash)) throw unauthenticated('Invalid API key');
      return { id: row.userId, keyId: parsed.id, tier: row.tier };
    },

    /** Deletes one of the caller's keys (possibly the one in use); another user's key is "not found". */
    async delete(viewer: Viewer, plaintext: unknown): Promise<void> {
      if (typeof plaintext !== 'string' || plaintext.length === 0) throw badInput('Missing apiKey');
      const parsed = parseKey(plaintext);
      const row = parsed ? await db.apiKey.findUnique({ where: { id: parsed.id }, omit: { hash: false } }) : null;
      if (!parsed || !row || row.userId !== viewer.id || !secretMatches(parsed.secret, row.hash)) throw notFound(KEY_NOT_FOUND);
      const signal = { kind: 'revoke_key', keyId: row.id } as const;
      const signalId = await db.$transaction(async (tx) => {
        const { count } = await tx.apiKey.deleteMany({ where: { id: row.id, userId: viewer.id } });
        return count ? signals.record(tx, signal) : null;
      });
      if (signalId === null) throw notFound(KEY_NOT_FOUND);
      await signals.deliver(signalId, signal);
    },
  };
}

export type ApiKeyService = ReturnType<typeof apiKeyService>;
