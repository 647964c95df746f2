/** Tool calls that wait for their payer's approval: answering them, their timeouts, and the replies that go on after. */
export { settleApprovalSchema } from './inputs.ts';
export type { SettleApprovalInput } from './inputs.ts';
export { approvalRules, APPROVAL_EXPIRY_QUEUE, REPLY_RESUME_QUEUE } from './service.ts';
export type { ApprovalRules, ApprovalStore } from './service.ts';
