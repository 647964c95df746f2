import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';
import { ToolCall } from './message.ts';

const SettleToolApprovalInput = builder.inputType('SettleToolApprovalInput', {
  description: "An answer to a tool call that waits for its payer's approval.",
  fields: (t) => ({
    sessionId: t.id({ required: true }),
    callId: t.id({ required: true, description: 'The tool call (ToolCall.id).' }),
    approve: t.boolean({ required: true, description: 'true runs it (charged as it runs); false denies it.' }),
    reason: t.string({ description: 'Why, told to the model on a denial (at most 1000 characters).' }),
  }),
});

builder.mutationFields((t) => ({
  settleToolApproval: t.field({
    type: ToolCall,
    description:
      "Approves or denies a tool call that waits for its payer's yes (only the payer may; once). Approved, it runs and is charged as the reply goes on; denied, the model is told why and nothing is charged.",
    args: { input: t.arg({ type: SettleToolApprovalInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      ctx.services.approvals.settle(viewerOf(ctx), String(input.sessionId), String(input.callId), {
        approve: input.approve,
        reason: input.reason ?? undefined,
      }),
  }),
}));
