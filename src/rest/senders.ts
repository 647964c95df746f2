import type { CreatorService } from '../domain/creators/index.ts';
import type { CreatorRow } from './creators.ts';

/** How long a sender's name and picture are reused before they are read again. */
const FRESH_MS = 60_000;
const MAX_ENTRIES = 10_000;

export type SenderLookup = ReadonlyMap<string, CreatorRow>;

/**
 * Senders of messages as REST shows them (populated, as the original did), read in one statement
 * per batch and kept a minute: a stream's frames carry messages of the same few senders, so a
 * busy session costs a read a minute, not one per frame.
 */
export function senderDirectory(creators: Pick<CreatorService, 'senders'>) {
  const known = new Map<string, { row: CreatorRow; at: number }>();

  return {
    async lookup(ids: readonly (string | null)[]): Promise<SenderLookup> {
      const now = Date.now();
      const found = new Map<string, CreatorRow>();
      const missing: string[] = [];
      for (const id of ids) {
        if (!id || found.has(id)) continue;
        const hit = known.get(id);
        if (hit && now - hit.at < FRESH_MS) found.set(id, hit.row);
        else missing.push(id);
      }
      if (missing.length) {
        // Without the database a message still goes out, its sender as an id only: a frame never
        // waits on, or fails for, a name.
        const rows = await creators.senders(missing).catch(() => []);
        for (const row of rows) {
          found.set(row.id, row);
          known.delete(row.id);
          known.set(row.id, { row, at: now });
        }
        // Oldest first in insertion order: trimmed from the front.
        for (const id of known.keys()) {
          if (known.size <= MAX_ENTRIES) break;
          known.delete(id);
        }
      }
      return found;
    },
  };
}

export type SenderDirectory = ReturnType<typeof senderDirectory>;
