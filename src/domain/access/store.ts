import type { Permission } from './service.ts';

/** A caller's place in a session, asked for by many requests at once. */
export interface PlaceAsk {
  sessionId: string;
  userId: string;
}

/** What the checks of a caller's place in a session read (`service.ts`). */
export interface AccessStore {
  /** The places asked for, of sessions that exist: `owner` for the session's owner, null for someone not in it. */
  places(asks: readonly PlaceAsk[]): Promise<Map<PlaceAsk, { permission: Permission | null }>>;
}

/** What an open watch's periodic re-check reads (`gate.ts`). */
export interface WatchAccessStore {
  /** Those of the API keys that still exist. */
  existingKeys(ids: readonly string[]): Promise<Set<string>>;
  /** For each of the sessions that still exists, who of `userIds` may watch it (its owner always). */
  members(sessionIds: string[], userIds: string[]): Promise<Map<string, Set<string>>>;
}
