import { badInput, notFound, unauthenticated } from '../core/errors.ts';
import type { SignalOutbox } from '../signals/service.ts';
import type { Viewer } from '../core/viewer.ts';
import { coalesced } from '../core/coalesce.ts';
import { generateKey, parseKey, secretMatches } from './secret.ts';
import type { ApiKeyStore } from './store.ts';

export const KEY_NOT_FOUND = 'API key not found';

/**
 * `signals` carries a deleted key's revocation to every instance (closing what was opened with
 * it); the store writes it with the deletion, so that it arrives even if the event bus was out
 * of reach.
 */
export function apiKeyService(store: ApiKeyStore, signals: Pick<SignalOutbox, 'deliver'>) {
  // Every request comes through here: the reads of requests that arrive together go in one statement.
  const keys = coalesced((ids: readonly string[]) => store.keys(ids));

  return {
    /** Issues a key for a user; the plaintext is returned here and never again. */
    async create(userId: string): Promise<{ id: string; apiKey: string }> {
      const key = generateKey();
      await store.create({ id: key.id, userId, hash: key.hash, preview: key.preview });
      return { id: key.id, apiKey: key.plaintext };
    },

    /**
     * Resolves a key to its user, reading the database every time so that a deleted key fails
     * on the very next request. Throws UNAUTHENTICATED for a missing or bad key.
     */
    async authenticate(plaintext: string | undefined | null): Promise<Viewer> {
      if (!plaintext) throw unauthenticated('Missing API key: send it in the X-Api-Key header');
      const parsed = parseKey(plaintext);
      const row = parsed ? await keys.load(parsed.id) : null;
      if (!parsed || !row || !secretMatches(parsed.secret, row.hash)) throw unauthenticated('Invalid API key');
      return { id: row.userId, keyId: parsed.id, tier: row.tier };
    },

    /** Deletes one of the caller's keys (possibly the one in use); another user's key is "not found". */
    async delete(viewer: Viewer, plaintext: unknown): Promise<void> {
      if (typeof plaintext !== 'string' || plaintext.length === 0) throw badInput('Missing apiKey');
      const parsed = parseKey(plaintext);
      const row = parsed ? await keys.load(parsed.id) : null;
      if (!parsed || !row || row.userId !== viewer.id || !secretMatches(parsed.secret, row.hash)) throw notFound(KEY_NOT_FOUND);
      const signal = { kind: 'revoke_key', keyId: row.id } as const;
      const signalId = await store.delete(row.id, viewer.id, signal);
      if (signalId === null) throw notFound(KEY_NOT_FOUND);
      await signals.deliver(signalId, signal);
    },
  };
}

export type ApiKeyService = ReturnType<typeof apiKeyService>;
