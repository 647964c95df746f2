import type { Prisma } from '../../generated/prisma/client.ts';
import { returnHold } from '../manna/stores/holds.ts';

type Tx = Prisma.TransactionClient;

/*
 * A task's state is the tasks' own: these statements run inside the caller's transaction, beside
 * the money moves of manna/ they come with. `tools/` sits below `tasks/`, so it is handed `claimTask`
 * by the composition; `sessions/` and `replies/` sit above and import these.
 */

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
 * holds given back, pending ones and those waiting for approval (not charged) cancelled. For
 * replies that end while a call of theirs is still unsettled, and for those a stopped process left.
 */
export async function abandonToolCalls(tx: Tx, where: Prisma.TaskWhereInput, error: string) {
  await releaseHolds(tx, where, error);
  await tx.task.updateMany({ where: { ...where, status: { in: ['pending', 'awaiting_approval'] } }, data: { status: 'cancelled', error } });
}
