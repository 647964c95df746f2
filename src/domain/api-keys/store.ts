import type { Signal } from '../signals/service.ts';

/** An API key as stored: its secret only as a hash. */
export interface StoredKey {
  id: string;
  userId: string;
  hash: string;
  /** The subscription tier of the key's user, which sets its rate limit. */
  tier: string;
}

/** Every statement the API key rules need. */
export interface ApiKeyStore {
  /** The keys asked for that exist. */
  keys(ids: readonly string[]): Promise<Map<string, StoredKey>>;
  create(key: { id: string; userId: string; hash: string; preview: string }): Promise<void>;
  /** Deletes the user's key, recording `signal` with the deletion; null when there was no such key of theirs. */
  delete(id: string, userId: string, signal: Signal): Promise<bigint | null>;
}
