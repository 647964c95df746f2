import { z } from 'zod';

/** An answer to a tool call that waits for approval: yes or no, and why (told to the model on a no). */
export const settleApprovalSchema = z.object({
  approve: z.boolean({ error: 'must be true (run it) or false (deny it)' }),
  reason: z.string().trim().max(1000, 'must be at most 1000 characters').optional(),
});
export type SettleApprovalInput = z.output<typeof settleApprovalSchema>;
