import type { Db } from '../../db/database.ts';
import { mannaFromText } from '../core/manna.ts';
import { credit } from './stores/ledger.ts';
import type { MannaStore } from './store.ts';

export function prismaMannaStore(db: Db): MannaStore {
  return {
    userNamed: (username) => db.user.findUnique({ where: { username }, select: { id: true, type: true } }),

    grant: (userId, kind, amount) =>
      db.$transaction(async (tx) => {
        const row = await credit(tx, { userId, kind, amount, reason: 'grant' });
        const balances = await tx.user.findUniqueOrThrow({
          where: { id: userId },
          select: { subscriptionBalance: true, foreverBalance: true },
        });
        return {
          ledgerId: row.id,
          amount: mannaFromText(amount),
          subscriptionBalance: mannaFromText(balances.subscriptionBalance.toString()),
          foreverBalance: mannaFromText(balances.foreverBalance.toString()),
        };
      }),

    ledger: (userId, from, take) =>
      db.mannaLedger.findMany({
        where: {
          userId,
          ...(from ? { OR: [{ createdAt: { lt: from.createdAt } }, { createdAt: from.createdAt, id: { lt: from.id } }] } : {}),
        },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        take,
      }),
  };
}
