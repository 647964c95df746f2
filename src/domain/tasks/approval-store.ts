import { Prisma } from '../../generated/prisma/client.ts';
import type { Db } from '../../db/database.ts';
import type { ToolCallView } from '../core/events.ts';
import type { Manna } from '../core/manna.ts';
import { toToolCallView } from '../core/stores/message-rows.ts';
import type { TaskStatus, ToolApprovalState } from '../core/vocabulary.ts';

/** A reply's call whose approval was asked, as settling it reads it. */
export interface ApprovalRow {
  id: string;
  sessionId: string;
  messageId: string;
  promptId: string | null;
  agentId: string | null;
  /** Who pays for it: the only user who may answer. */
  userId: string;
  status: TaskStatus;
  approval: ToolApprovalState;
  tool: string;
}

/** An answer to an approval: yes (the call goes back to `pending`, to be charged as it runs), or no. */
export type ApprovalAnswer = { approval: 'approved' } | { approval: 'denied' | 'expired'; error: string };

/**
 * The statements of tool calls that wait for approval. A call's state is the tasks' own, so they
 * live here; each moves a call out of `awaiting_approval` in one conditional update, so of two
 * answers (the payer's, the timeout's, a second click) exactly one counts.
 */
export function approvalStatements(db: Db) {
  return {
    /** Marks a pending call as waiting for approval at `price` (nothing is held); null when it is no longer pending. */
    async request(id: string, price: Manna): Promise<ToolCallView | null> {
      const { count } = await db.task.updateMany({
        where: { id, status: 'pending' },
        data: { status: 'awaiting_approval', approval: 'requested', cost: new Prisma.Decimal(price) },
      });
      return count === 1 ? toToolCallView(await db.task.findUniqueOrThrow({ where: { id } })) : null;
    },

    /** A call of the session whose approval was ever asked; null otherwise. */
    async find(sessionId: string, id: string): Promise<ApprovalRow | null> {
      const row = await db.task.findFirst({
        where: { id, sessionId, approval: { not: null }, messageId: { not: null } },
        select: {
          id: true,
          sessionId: true,
          messageId: true,
          agentId: true,
          userId: true,
          status: true,
          approval: true,
          tool: true,
          message: { select: { promptId: true } },
        },
      });
      if (!row) return null;
      const { message, ...call } = row;
      return {
        ...call,
        sessionId: call.sessionId!,
        messageId: call.messageId!,
        promptId: message?.promptId ?? null,
        approval: call.approval!,
      };
    },

    /** Settles a call still waiting; the call as saved, or null when it was settled (or ended) first. */
    async answer(id: string, answer: ApprovalAnswer): Promise<ToolCallView | null> {
      const data: Prisma.TaskUpdateManyMutationInput =
        answer.approval === 'approved'
          ? { status: 'pending', approval: 'approved' }
          : // Nothing was held, so nothing is refunded; the price asked is not a charge.
            { status: 'failed', approval: answer.approval, error: answer.error, cost: null };
      const { count } = await db.task.updateMany({ where: { id, status: 'awaiting_approval' }, data });
      return count === 1 ? toToolCallView(await db.task.findUniqueOrThrow({ where: { id } })) : null;
    },

    /** Where these calls stand, to go on with a paused reply. */
    async outcomes(ids: string[]): Promise<{ id: string; status: TaskStatus; error: string | null }[]> {
      return db.task.findMany({ where: { id: { in: ids } }, select: { id: true, status: true, error: true } });
    },
  };
}

export type ApprovalStatements = ReturnType<typeof approvalStatements>;
