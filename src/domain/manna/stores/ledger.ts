import { Prisma } from '../../../generated/prisma/client.ts';
import { type Manna, mannaFromText } from '../../core/manna.ts';
import type { BalanceKind } from '../../core/vocabulary.ts';

type Tx = Prisma.TransactionClient;

/** What a move of manna is for: kept on its ledger rows. */
export interface MannaContext {
  reason: string;
  sessionId?: string | null;
  messageId?: string | null;
  taskId?: string | null;
}

export interface MannaMove extends MannaContext {
  userId: string;
  kind: BalanceKind;
  /** Positive: credit. Exact decimal; never a float that drifts. */
  amount: Prisma.Decimal | string;
}

const column = { subscription: 'subscriptionBalance', forever: 'foreverBalance' } as const;

const row = (move: MannaContext & { userId: string; kind: BalanceKind; amount: Prisma.Decimal; balanceAfter: Prisma.Decimal }) => ({
  userId: move.userId,
  kind: move.kind,
  amount: move.amount,
  balanceAfter: move.balanceAfter,
  reason: move.reason,
  sessionId: move.sessionId ?? null,
  messageId: move.messageId ?? null,
  taskId: move.taskId ?? null,
});

/**
 * Moves manna into a balance and writes its ledger row, inside the caller's transaction, so a
 * balance never changes without a row that explains it.
 */
export async function credit(tx: Tx, move: MannaMove) {
  const amount = new Prisma.Decimal(move.amount);
  if (!amount.isPositive() || amount.isZero()) throw new Error('credit amount must be positive');
  const field = column[move.kind];
  // Each balance named as a literal: the owners test reads that manna writes only money columns of User.
  const user = await tx.user.update({
    where: { id: move.userId },
    data: move.kind === 'subscription' ? { subscriptionBalance: { increment: amount } } : { foreverBalance: { increment: amount } },
    select: { subscriptionBalance: true, foreverBalance: true },
  });
  return tx.mannaLedger.create({ data: row({ ...move, amount, balanceAfter: user[field] }) });
}

/**
 * Takes `amount` from a user's manna, subscription manna first, with a ledger row for each kind
 * it came from; or takes nothing and returns null when the balance cannot cover it. The user's
 * row is locked while it is read and written, so concurrent spends queue and none overdraws.
 */
export async function debit(tx: Tx, userId: string, amount: Prisma.Decimal, context: MannaContext) {
  const value = amount.toString();
  const [taken] = await tx.$queryRaw<
    { fromSubscription: Prisma.Decimal; fromForever: Prisma.Decimal; subscriptionBalance: Prisma.Decimal; foreverBalance: Prisma.Decimal }[]
  >`
    WITH before AS (SELECT "subscriptionBalance" AS s FROM "User" WHERE "id" = ${userId} FOR UPDATE)
    UPDATE "User" AS u
    SET "subscriptionBalance" = u."subscriptionBalance" - LEAST(b.s, ${value}::decimal),
        "foreverBalance" = u."foreverBalance" - (${value}::decimal - LEAST(b.s, ${value}::decimal))
    FROM before AS b
    WHERE u."id" = ${userId} AND u."subscriptionBalance" + u."foreverBalance" >= ${value}::decimal
    RETURNING LEAST(b.s, ${value}::decimal) AS "fromSubscription", ${value}::decimal - LEAST(b.s, ${value}::decimal) AS "fromForever",
              u."subscriptionBalance", u."foreverBalance"`;
  if (!taken) return null;
  const parts = [
    {
      kind: 'subscription' as const,
      amount: new Prisma.Decimal(taken.fromSubscription),
      balanceAfter: new Prisma.Decimal(taken.subscriptionBalance),
    },
    { kind: 'forever' as const, amount: new Prisma.Decimal(taken.fromForever), balanceAfter: new Prisma.Decimal(taken.foreverBalance) },
  ].filter((p) => !p.amount.isZero());
  await tx.mannaLedger.createMany({
    data: parts.map((p) => row({ ...context, userId, kind: p.kind, amount: p.amount.negated(), balanceAfter: p.balanceAfter })),
  });
  return parts.map(({ kind, amount }) => ({ kind, amount }));
}

/** What a user can spend (subscription manna plus purchased manna), as a refused debit tells it. */
export async function spendable(tx: Tx, userId: string): Promise<Manna> {
  const { subscriptionBalance, foreverBalance } = await tx.user.findUniqueOrThrow({
    where: { id: userId },
    select: { subscriptionBalance: true, foreverBalance: true },
  });
  return mannaFromText(subscriptionBalance.plus(foreverBalance).toString());
}

/** Gives back what a tool call's hold took, to the balances it came from, with its own rows. */
export async function refund(tx: Tx, taskId: string, context: MannaContext) {
  const held = await tx.mannaLedger.findMany({
    where: { taskId, amount: { lt: 0 } },
    select: { userId: true, kind: true, amount: true },
  });
  for (const h of held) await credit(tx, { ...context, taskId, userId: h.userId, kind: h.kind, amount: h.amount.negated() });
  return held.reduce((sum, h) => sum.plus(h.amount.negated()), new Prisma.Decimal(0));
}
