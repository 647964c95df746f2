import { Prisma } from '../../generated/prisma/client.ts';
import { refund } from '../manna/ledger.ts';

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

/**
 * Cancels the running tool calls `where` selects and gives back what their holds took, with a
 * refund row each. Used where nobody will settle them any more: before their session is deleted
 * (its rows go, and the ledger's links to them with it), and for calls a stopped process left.
 */
export async function releaseHolds(tx: Tx, where: Prisma.ToolCallWhereInput, error: string) {
  const running = await tx.toolCall.findMany({ where: { ...where, status: 'running' }, select: { id: true, tool: true, messageId: true, message: { select: { sessionId: true } } } });
  let released = 0;
  for (const call of running) {
    if (!(await claimToolCall(tx, call.id, 'running', { status: 'cancelled', error }))) continue;
    await refund(tx, call.id, { reason: `refund: ${call.tool} cancelled`, sessionId: call.message.sessionId, messageId: call.messageId });
    released++;
  }
  return released;
}
