import type { Decimal } from '@prisma/client/runtime/client';
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

/**
 * Adds the tokens of replies being completed to their sessions' counters, counting only replies
 * still streaming, so a save made again (a group retried reply by reply) counts nothing twice,
 * and not asked to stop by a newer prompt (those are saved as they stopped, tokens and all).
 * The first statement of the transaction that completes them: the sessions' rows are taken
 * before the messages', in the order a session delete takes them. Returns the sessions counted
 * (one deleted meanwhile is not).
 */
export async function countReplyTokens(tx: Pick<Tx, '$queryRaw'>, replies: readonly { messageId: string; tokens: number }[]) {
  const counted = await tx.$queryRaw<{ id: string }[]>`
    UPDATE "Session" AS s SET "tokensSpent" = s."tokensSpent" + t.n, "updatedAt" = now()
    FROM (
      SELECT m."sessionId" AS session_id, sum(v.n)::int AS n
      FROM unnest(${replies.map((r) => r.messageId)}::text[], ${replies.map((r) => r.tokens)}::int[]) AS v(id, n)
      JOIN "Message" AS m ON m."id" = v.id AND m."status" = 'streaming' AND m."stopRequest" IS NULL
      GROUP BY m."sessionId"
    ) AS t
    WHERE s."id" = t.session_id
    RETURNING s."id"`;
  return counted.map((r) => r.id);
}

/**
 * Adds a tool call's hold to the session's manna counter, if its manna budget has room for it
 * (in the hold's transaction). False when it has not.
 */
export async function spendManna(tx: Pick<Tx, '$executeRaw'>, sessionId: string, cost: Decimal) {
  const within = await tx.$executeRaw`
    UPDATE "Session" SET "mannaSpent" = "mannaSpent" + ${cost.toString()}::decimal
    WHERE "id" = ${sessionId} AND ("mannaBudget" IS NULL OR "mannaSpent" + ${cost.toString()}::decimal <= "mannaBudget")`;
  return within > 0;
}
