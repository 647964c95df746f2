import { Prisma } from '../../generated/prisma/client.ts';
import type { BalanceKind } from '../../generated/prisma/enums.ts';

type Tx = Prisma.TransactionClient;

export interface MannaMove {
  userId: string;
  kind: BalanceKind;
  /** Positive: credit. Exact decimal; never a float that drifts. */
  amount: Prisma.Decimal | string;
  reason: string;
  sessionId?: string;
  toolCallId?: string;
}

const column = { subscription: 'subscriptionBalance', forever: 'foreverBalance' } as const;

/**
 * Moves manna into a balance and writes its ledger row, inside the caller's transaction, so a
 * balance never changes without a row that explains it.
 */
export async function credit(tx: Tx, move: MannaMove) {
  const amount = new Prisma.Decimal(move.amount);
  if (!amount.isPositive() || amount.isZero()) throw new Error('credit amount must be positive');
  const field = column[move.kind];
  const user = await tx.user.update({ where: { id: move.userId }, data: { [field]: { increment: amount } } });
  return tx.mannaLedger.create({
    data: {
      userId: move.userId,
      kind: move.kind,
      amount,
      balanceAfter: user[field],
      reason: move.reason,
      sessionId: move.sessionId,
      toolCallId: move.toolCallId,
    },
  });
}
