import type { Prisma } from '../../../generated/prisma/client.ts';
import type { Budget } from '../../core/budgets.ts';

type Tx = Prisma.TransactionClient;

/**
 * Spends `turns` model calls of the session's turn budget if every budget still allows it, in
 * one conditional UPDATE: concurrent prompts queue on the row, so exactly as many go through as
 * the budget has room for. `pendingTokens` are tokens already used by the reply asking, not yet
 * saved. Returns the budget that stopped it, or null when the turns are reserved.
 */
export async function reserveTurns(
  tx: Pick<Tx, '$executeRaw' | '$queryRaw'>,
  sessionId: string,
  turns: number,
  pendingTokens = 0,
): Promise<Budget | null> {
  const updated = await tx.$executeRaw`
    UPDATE "Session" SET "turnsSpent" = "turnsSpent" + ${turns}, "updatedAt" = now()
    WHERE "id" = ${sessionId}
      AND ("turnBudget" IS NULL OR "turnsSpent" + ${turns} <= "turnBudget")
      AND ("tokenBudget" IS NULL OR "tokensSpent" + ${pendingTokens} < "tokenBudget")
      AND ("mannaBudget" IS NULL OR "mannaSpent" < "mannaBudget")`;
  if (updated === 1) return null;
  const [s] = await tx.$queryRaw<{ tokens: boolean; manna: boolean }[]>`
    SELECT ("tokenBudget" IS NOT NULL AND "tokensSpent" + ${pendingTokens} >= "tokenBudget") AS tokens,
           ("mannaBudget" IS NOT NULL AND "mannaSpent" >= "mannaBudget") AS manna
    FROM "Session" WHERE "id" = ${sessionId}`;
  return s?.tokens ? 'tokens' : s?.manna ? 'manna' : 'turns';
}

/** Adds a reply's tokens to the session's counter (in the transaction that saves the reply). */
export const addTokens = (tx: Tx, sessionId: string, tokens: number) =>
  tx.$executeRaw`UPDATE "Session" SET "tokensSpent" = "tokensSpent" + ${tokens}, "updatedAt" = now() WHERE "id" = ${sessionId}`;
