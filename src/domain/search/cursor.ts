import { z } from 'zod';
import { badInput } from '../core/errors.ts';
import { searchOrders, sortDirections, type SearchOrderBy, type SortDirection } from './inputs.ts';
import type { SortKey } from './store.ts';

/**
 * Connection cursors are keyset positions: the sort key and id of a result, with the order they
 * belong to. Rows after a cursor stay the same when earlier ones are added or removed, which
 * offsets would not do under an infinitely scrolling client.
 */
const cursorSchema = z.object({
  o: z.enum(searchOrders),
  d: z.enum(sortDirections),
  k: z.union([z.number(), z.iso.datetime()]),
  id: z.string().min(1),
});

export function encodeCursor(orderBy: SearchOrderBy, direction: SortDirection, key: SortKey, id: string): string {
  return Buffer.from(JSON.stringify({ o: orderBy, d: direction, k: key instanceof Date ? key.toISOString() : key, id })).toString(
    'base64url',
  );
}

/** The position a cursor names; any cursor not made by this search in this order is refused. */
export function decodeCursor(cursor: string, orderBy: SearchOrderBy, direction: SortDirection): { key: SortKey; id: string } {
  let decoded: z.infer<typeof cursorSchema> | undefined;
  try {
    decoded = cursorSchema.parse(JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')));
  } catch {
    decoded = undefined;
  }
  const keyFits =
    decoded &&
    (orderBy === 'createdAt'
      ? typeof decoded.k === 'string'
      : typeof decoded.k === 'number' && (orderBy === 'score' || (Number.isInteger(decoded.k) && Math.abs(decoded.k) < 2 ** 31)));
  if (!decoded || !keyFits || decoded.o !== orderBy || decoded.d !== direction || decoded.id.includes('\u0000'))
    throw badInput('Invalid cursor');
  return { key: orderBy === 'createdAt' ? new Date(decoded.k as string) : (decoded.k as number), id: decoded.id };
}
