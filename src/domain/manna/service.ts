import { z } from 'zod';
import { notFound } from '../core/errors.ts';
import { decodeCursor, encodeCursor, pageSchema } from '../core/cursors.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import type { LedgerPosition, MannaStore } from './store.ts';

/** A grant's amount, as the CLI gives it: checked before a database is opened, and again here. */
export const amountSchema = z
  .string()
  .regex(/^\d{1,12}(\.\d{1,4})?$/, 'must be a positive amount with at most 4 decimals')
  .refine((a) => Number(a) > 0, 'must be more than 0');

const ledgerCursor = (row: LedgerPosition) => encodeCursor('led', `${row.createdAt.toISOString()}|${row.id}`);
const ledgerPosition = (cursor: string) =>
  decodeCursor('led', cursor, (v) => {
    const [at, id] = v.split('|');
    const date = new Date(at ?? '');
    return id && !Number.isNaN(date.getTime()) ? { createdAt: date, id } : null;
  });

/** Balances and where manna went: every move is a ledger row (see core/ledger.ts). */
export function mannaService(store: MannaStore) {
  return {
    /** Adds manna to a user's balance (an operator's grant, from the CLI). */
    async grant(username: string, rawAmount: string, kind: 'subscription' | 'forever') {
      const amount = parseInput(amountSchema, rawAmount);
      const user = await store.userNamed(username);
      if (user?.type !== 'user') throw notFound(`No user named "${username}"`);
      const { ledgerId, amount: granted, subscriptionBalance, foreverBalance } = await store.grant(user.id, kind, amount);
      return { ledgerId, amount: granted, kind, subscriptionBalance, foreverBalance };
    },

    /** The caller's ledger, newest first, a page at a time. */
    async ledger(viewer: Viewer, page: { first?: unknown; after?: unknown }) {
      const { first, after } = parseInput(pageSchema, Object.fromEntries(Object.entries(page).filter(([, v]) => v != null)));
      const rows = await store.ledger(viewer.id, after ? ledgerPosition(after) : null, first + 1);
      return { rows: rows.slice(0, first), hasNextPage: rows.length > first, cursor: ledgerCursor };
    },
  };
}

export type MannaService = ReturnType<typeof mannaService>;
