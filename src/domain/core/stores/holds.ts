import type { Prisma } from '../../../generated/prisma/client.ts';
import { refund } from './ledger.ts';

type Tx = Prisma.TransactionClient;

/**
 * Claims a tool call for settling: moves it out of `from` in one conditional update, so that of
 * two parties settling the same call (the reply that ran it, and a session being deleted or a
 * restart cleaning up) exactly one does, and its hold is refunded at most once.
 */
export async function claimToolCall(tx: Tx, id: string, from: 'pending' | 'running', data: Prisma.ToolCallUpdateManyMutationInput) {
  const { count } = await tx.toolCall.updateMany({ where: { id, status: from }, data });
  return count === 1;
}

/** Gives what a call's hold took back to its payer (refund rows) and to its session's manna budget. */
export async function returnHold(tx: Tx, toolCallId: string, context: { reason: string; sessionId: string; messageId: string }) {
  const returned = await refund(tx, toolCallId, context);
  await tx.session.updateMany({ where: { id: context.sessionId }, data: { mannaSpent: { decrement: returned } } });
}

/**
 * Cancels the running tool calls `where` selects and gives back what their holds took, to the
 * payer (a refund row each) and to the session's manna budget. Used where nobody will settle
 * them any more: before their session is deleted (its rows go, and the ledger's links to them
 * with it), and for calls a stopped process left. Lock the calls' sessions first, as settling does.
 */
export async function releaseHolds(tx: Tx, where: Prisma.ToolCallWhereInput, error: string) {
  const running = await tx.toolCall.findMany({
    where: { ...where, status: 'running' },
    select: { id: true, tool: true, messageId: true, message: { select: { sessionId: true } } },
  });
  let released = 0;
  for (const call of running) {
    if (!(await claimToolCall(tx, call.id, 'running', { status: 'cancelled', error }))) continue;
    await returnHold(tx, call.id, {
      reason: `refund: ${call.tool} cancelled`,
      sessionId: call.message.sessionId,
      messageId: call.messageId,
    });
    released++;
  }
  return released;
}

/**
 * Ends the unsettled tool calls `where` selects for good: running ones are cancelled with their
 * holds given back, pending ones (not yet charged) cancelled. For replies that end while a call
 * of theirs is still unsettled, and for those a stopped process left.
 */
export async function abandonToolCalls(tx: Tx, where: Prisma.ToolCallWhereInput, error: string) {
  await releaseHolds(tx, where, error);
  await tx.toolCall.updateMany({ where: { ...where, status: 'pending' }, data: { status: 'cancelled', error } });
}
