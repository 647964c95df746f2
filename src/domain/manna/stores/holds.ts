import type { Decimal } from '@prisma/client/runtime/client';
import type { Prisma } from '../../../generated/prisma/client.ts';
import { refund } from './ledger.ts';

type Tx = Prisma.TransactionClient;

/** Where a task's manna moves are filed: its session and message, when it has them. */
export interface HoldPlace {
  sessionId: string | null;
  messageId: string | null;
}

/**
 * Counts a tool call's hold against the daily manna cap of the deployment whose chat `sessionId`
 * is, when it is one (`defaultCap` where the deployment sets none). The deployment's row is
 * locked first, so the holds of one deployment take turns on every instance and none passes the
 * cap, however many chats spend at once. The day is UTC, by the database's clock. False: over
 * the cap, and nothing counted.
 */
export async function countAgainstDailyCap(tx: Tx, call: { taskId: string; sessionId: string }, cost: Decimal, defaultCap: number) {
  const [deployment] = await tx.$queryRaw<{ id: string; cap: string }[]>`
    SELECT d."id", COALESCE((d."config"->>'daily_manna_cap')::decimal, ${defaultCap}::decimal)::text AS "cap"
    FROM "DeploymentChat" AS c JOIN "Deployment" AS d ON d."id" = c."deploymentId"
    WHERE c."sessionId" = ${call.sessionId}
    LIMIT 1
    FOR NO KEY UPDATE OF d`;
  if (!deployment) return true;
  const counted = await tx.$executeRaw`
    INSERT INTO "DeploymentCharge" ("taskId", "deploymentId", "day", "amount")
    SELECT ${call.taskId}, ${deployment.id}, (now() AT TIME ZONE 'UTC')::date, ${cost.toString()}::decimal
    WHERE (SELECT COALESCE(SUM("amount"), 0) FROM "DeploymentCharge"
           WHERE "deploymentId" = ${deployment.id} AND "day" = (now() AT TIME ZONE 'UTC')::date)
          + ${cost.toString()}::decimal <= ${deployment.cap}::decimal`;
  return counted > 0;
}

/**
 * Gives what a task's hold took back to its payer (refund rows), to its session's manna budget
 * when it ran in one, and to its deployment's day when it counted against one.
 */
export async function returnHold(tx: Tx, taskId: string, context: HoldPlace & { reason: string }) {
  const returned = await refund(tx, taskId, context);
  if (context.sessionId) await tx.session.updateMany({ where: { id: context.sessionId }, data: { mannaSpent: { decrement: returned } } });
  await tx.deploymentCharge.deleteMany({ where: { taskId } });
  return returned;
}
