import { z } from 'zod';
import { badInput } from './errors.ts';

/**
 * Opaque page cursors. Each kind has a prefix and a parser; anything that does not decode to a
 * valid position is "Invalid cursor" (400 / BAD_USER_INPUT), never reaching the database.
 */
export const encodeCursor = (kind: string, value: string) => Buffer.from(`${kind}:${value}`).toString('base64url');

export function decodeCursor<T>(kind: string, cursor: string, parse: (value: string) => T | null): T {
  const text = /^[A-Za-z0-9_-]+={0,2}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const value = text.startsWith(`${kind}:`) ? parse(text.slice(kind.length + 1)) : null;
  if (value === null) throw badInput('Invalid cursor');
  return value;
}

export const parseOrdinal = (v: string) => (/^\d{1,10}$/.test(v) && Number(v) <= 2_147_483_647 ? Number(v) : null);

/** A forward page of a list: `first` items after the cursor `after`. */
export const pageSchema = z.object({
  first: z.coerce
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(100, 'must be at most 100')
    .default(20),
  after: z.string().max(200).optional(),
});
