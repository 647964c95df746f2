import { badInput } from '../../domain/core/errors.ts';
import { builder } from '../builder.ts';
import { toConnection } from '../connection.ts';
import { viewerOf } from '../context.ts';
import { Creator } from './creator.ts';
import { BalanceKindEnum } from './enums.ts';

export const LedgerEntry = builder.prismaObject('MannaLedger', {
  name: 'LedgerEntry',
  description: 'One move of manna: a grant, a tool call held, a refund. Balances are always the sums of these.',
  fields: (t) => ({
    id: t.exposeID('id'),
    amount: t.float({ description: 'Positive: added; negative: spent.', resolve: (e) => e.amount.toNumber() }),
    kind: t.expose('kind', { type: BalanceKindEnum }),
    balanceAfter: t.float({ description: 'The balance of this kind right after the move.', resolve: (e) => e.balanceAfter.toNumber() }),
    reason: t.exposeString('reason'),
    sessionId: t.globalID({ nullable: true, resolve: (e) => (e.sessionId ? { type: 'Session', id: e.sessionId } : null) }),
    messageId: t.globalID({ nullable: true, resolve: (e) => (e.messageId ? { type: 'Message', id: e.messageId } : null) }),
    toolCallId: t.id({
      nullable: true,
      description: "The tool call (a task) the move was for, by its raw id: the id of the message's toolCalls, and the task's rawId.",
      resolve: (e) => e.taskId,
    }),
    taskId: t.globalID({
      nullable: true,
      description: 'The task the move was for (a tool call of a reply is one too): its global id, as Task.id and node(id:) take it.',
      resolve: (e) => (e.taskId ? { type: 'Task', id: e.taskId } : null),
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.objectField(Creator, 'ledger', (t) =>
  t.connection({
    type: LedgerEntry,
    nullable: true,
    description: 'Where your manna came from and went, newest first (only on your own profile).',
    resolve: async (user, args, ctx) => {
      const viewer = viewerOf(ctx);
      if (user.id !== viewer.id) return null;
      if (args.last != null || args.before != null)
        throw badInput('The ledger pages forwards only: use first and after', [args.last != null ? 'last' : 'before']);
      const { rows, hasNextPage, cursor } = await ctx.services.manna.ledger(viewer, { first: args.first, after: args.after });
      return toConnection(rows, cursor, { hasNextPage, hasPreviousPage: Boolean(args.after) });
    },
  }),
);
