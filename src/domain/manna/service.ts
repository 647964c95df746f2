import { z } from 'zod';
import type { Db } from '../../db/database.ts';
import { Prisma } from '../../generated/prisma/client.ts';
import { notFound } from '../core/errors.ts';
import { decodeCursor, encodeCursor, pageSchema } from '../core/cursors.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { credit } from '../core/stores/ledger.ts';

const amountSchema = z
  .string()
  .regex(/^\d{1,12}(\.\d{1,4})?$/, 'must be a positive amount with at most 4 decimals')
  .refine((a) => Number(a) > 0, 'must be more than 0');

const ledgerCursor = (row: { createdAt: Date; id: string }) => encodeCursor('led', `${row.createdAt.toISOString()}|${row.id}`);
const ledgerPosition = (cursor: string) =>
  decodeCursor('led', cursor, (v) => {
    const [at, id] = v.split('|');
    const date = new Date(at ?? '');
    return id && !Number.isNaN(date.getTime()) ? { createdAt: date, id } : null;
  });

/** Balances and where manna went: every move is a ledger row (see ledger.ts). */
export function mannaService(db: Db) {
  return {
    /** Adds manna to a user's balance (an operator's grant, from the CLI). */
    async grant(username: string, rawAmount: string, kind: 'subscription' | 'forever') {
      const amount = parseInput(amountSchema, rawAmount);
      const user = await db.user.findUnique({ where: { username }, select: { id: true, type: true } });
      if (!user || user.type !== 'user') throw notFound(`No user named "${username}"`);
      return db.$transaction(async (tx) => {
        const row = await credit(tx, { userId: user.id, kind, amount, reason: 'grant' });
        const balances = await tx.user.findUniqueOrThrow({
          where: { id: user.id },
          select: { subscriptionBalance: true, foreverBalance: true },
        });
        return { ledgerId: row.id, amount: new Prisma.Decimal(amount), kind, ...balances };
      });
    },

    /** The caller's ledger, newest first, a page at a time. */
    async ledger(viewer: Viewer, page: { first?: unknown; after?: unknown }) {
      const { first, after } = parseInput(pageSchema, Object.fromEntries(Object.entries(page).filter(([, v]) => v != null)));
      const from = after ? ledgerPosition(after) : null;
      const rows = await db.mannaLedger.findMany({
        where: {
          userId: viewer.id,
          ...(from ? { OR: [{ createdAt: { lt: from.createdAt } }, { createdAt: from.createdAt, id: { lt: from.id } }] } : {}),
        },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        take: first + 1,
      });
      return { rows: rows.slice(0, first), hasNextPage: rows.length > first, cursor: ledgerCursor };
    },
  };
}

export type MannaService = ReturnType<typeof mannaService>;
