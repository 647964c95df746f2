import type { Decimal } from '@prisma/client/runtime/client';
import type { Prisma } from '../../../generated/prisma/client.ts';
import { refund } from './ledger.ts';

type Tx = Prisma.TransactionClient;

/**
 * Claims a task (a reply's tool call, or one made by itself) for settling: moves it out of `from`
 * in one conditional update, so that of two parties settling the same task (the one that ran
 * it, and a cancel, a session being deleted or a restart cleaning up) exactly one does, and its
 * hold is refunded at most once.
 */
export async function claimTask(tx: Tx, id: string, from: 'pending' | 'running', data: Prisma.TaskUpdateManyMutationInput) {
  const { count } = await tx.task.updateMany({ where: { id, status: from }, data });
  return count === 1;
}

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

/**
 * Cancels the running tasks `where` selects and gives back what their holds took, to the
 * payer (a refund row each) and to the session's manna budget. Used where nobody will settle
 * them any more: before their session is deleted (its rows go, and the ledger's links to them
 * with it), and for calls a stopped process left. Lock the calls' sessions first, as settling does.
 */
export async function releaseHolds(tx: Tx, where: Prisma.TaskWhereInput, error: string) {
  const running = await tx.task.findMany({
    where: { ...where, status: 'running' },
    select: { id: true, tool: true, messageId: true, sessionId: true },
  });
  let released = 0;
  for (const call of running) {
    if (!(await claimTask(tx, call.id, 'running', { status: 'cancelled', error }))) continue;
    await returnHold(tx, call.id, { reason: `refund: ${call.tool} cancelled`, sessionId: call.sessionId, messageId: call.messageId });
    released++;
  }
  return released;
}

/**
 * Ends the unsettled tool calls `where` selects for good: running ones are cancelled with their
 * holds given back, pending ones (not yet charged) cancelled. For replies that end while a call
 * of theirs is still unsettled, and for those a stopped process left.
 */
export async function abandonToolCalls(tx: Tx, where: Prisma.TaskWhereInput, error: string) {
  await releaseHolds(tx, where, error);
  await tx.task.updateMany({ where: { ...where, status: 'pending' }, data: { status: 'cancelled', error } });
}
