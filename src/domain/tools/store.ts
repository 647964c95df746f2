import { Prisma } from '../../generated/prisma/client.ts';
import type { Db } from '../../db/database.ts';
import { recordCreations } from '../creations/store.ts';
import { countAgainstDailyCap, returnHold } from '../manna/stores/holds.ts';
import { debit, spendable } from '../manna/stores/ledger.ts';
import { isNoManna, type Manna } from '../core/manna.ts';
import { spendManna } from '../manna/stores/session-budgets.ts';
import { toToolCallView } from '../core/stores/message-rows.ts';
import type { HoldRefused, ToolStore } from './ports.ts';

/** The tasks' statements a tool call's row is written with (`tasks/store.ts`, `tasks/settle-store.ts`, `tasks/approval-store.ts`). */
export interface TaskStatements extends Pick<ToolStore, 'record'> {
  /** Moves the task out of `from` in the caller's transaction; false when another party settled it first. */
  claim(tx: Prisma.TransactionClient, id: string, from: 'pending' | 'running', data: Prisma.TaskUpdateManyMutationInput): Promise<boolean>;
  approvals: { request(id: string, price: Manna): ReturnType<ToolStore['awaitApproval']>; outcomes: ToolStore['approvalOutcomes'] };
}

/** A hold that must take nothing: thrown inside its transaction so that all of it rolls back. */
class Refusal extends Error {
  constructor(readonly why: HoldRefused) {
    super(why.refused);
  }
}

/**
 * Tool calls on Prisma: recorded, charged with ledger rows, settled. `deploymentDailyCap`: the
 * daily manna cap of a deployment that sets none (DEPLOYMENT_DAILY_MANNA_CAP). A call is a task's
 * row, which the tasks' store writes: `tasks` sits above `tools`, so the composition hands its
 * statements in (recording the calls, and moving one from a state to the next as it settles).
 */
export function toolStore(db: Db, caps: { deploymentDailyCap: number }, tasks: TaskStatements): ToolStore {
  const claimTask = tasks.claim;
  return {
    async payers(agentId, sessionId) {
      const [agent, session] = await Promise.all([
        db.agent.findUniqueOrThrow({
          where: { id: agentId },
          select: { tools: true, toolApproval: true, ownerPays: true, ownerId: true, _count: { select: { mcpTools: true } } },
        }),
        db.session.findUniqueOrThrow({ where: { id: sessionId }, select: { ownerId: true } }),
      ]);
      return {
        tools: agent.tools,
        toolApproval: agent.toolApproval,
        ownerPays: agent.ownerPays,
        agentOwnerId: agent.ownerId,
        sessionOwnerId: session.ownerId,
        mcpTools: agent._count.mcpTools,
      };
    },

    record: tasks.record,
    awaitApproval: (call, price) => tasks.approvals.request(call.id, price),
    approvalOutcomes: (ids) => tasks.approvals.outcomes(ids),

    async hold(call, price, payer, place) {
      const cost = new Prisma.Decimal(price);
      try {
        await db.$transaction(async (tx) => {
          if (!isNoManna(price)) {
            // A deployment's chat: its row stays locked until this hold commits, so its holds take turns.
            if (!(await countAgainstDailyCap(tx, { taskId: call.id, sessionId: place.sessionId }, cost, caps.deploymentDailyCap)))
              throw new Refusal({ refused: 'cap' });
            if (!(await spendManna(tx, place.sessionId, cost))) throw new Refusal({ refused: 'budget' });
            const taken = await debit(tx, payer, cost, {
              reason: `tool: ${call.tool}`,
              sessionId: place.sessionId,
              messageId: place.messageId,
              taskId: call.id,
            });
            if (!taken) throw new Refusal({ refused: 'balance', balance: await spendable(tx, payer) });
          }
          // A call whose session was deleted meanwhile is gone: roll the charge back.
          if (!(await claimTask(tx, call.id, 'pending', { status: 'running', cost }))) throw new Refusal({ refused: 'gone' });
        });
        return null;
      } catch (e) {
        if (e instanceof Refusal) return e.why;
        throw e;
      }
    },

    async settle(call, place, outcome, held, creations) {
      const saved = await db.$transaction(async (tx) => {
        const data = {
          status: outcome.status,
          result: (outcome.result ?? Prisma.JsonNull) as Prisma.InputJsonValue,
          error: outcome.error ?? null,
          // A completed call is done: tasks read progress, and a reply's call reports none as it runs.
          ...(outcome.status === 'completed' ? { progress: 1 } : {}),
        };
        const refunding = held && outcome.status !== 'completed';
        // The session's row before the call's, in the order a session delete takes them, so the two never deadlock.
        if (refunding) await tx.$queryRaw`SELECT 1 FROM "Session" WHERE "id" = ${place.sessionId} FOR UPDATE`;
        // Someone else settled it: its session was deleted while it ran, and the hold given back then.
        if (!(await claimTask(tx, call.id, held ? 'running' : 'pending', data))) return null;
        if (refunding)
          await returnHold(tx, call.id, {
            reason: `refund: ${call.tool} ${outcome.status}`,
            sessionId: place.sessionId,
            messageId: place.messageId,
          });
        await recordCreations(tx, call.id, creations);
        return tx.task.findUniqueOrThrow({ where: { id: call.id } });
      });
      return saved && toToolCallView(saved);
    },
  };
}
