/** The tasks service's front: its rules, their inputs, and a task as its store reads it. */
export {
  cancelTaskSchema,
  costTaskSchema,
  createTaskSchema,
  outputTypes,
  taskOrders,
  taskPageSchema,
  taskStatuses,
  taskTypes,
} from './inputs.ts';
export { canReadTask, outputTypeOf, taskService } from './service.ts';
export type { TaskService } from './service.ts';
export { recordToolCalls, taskStore } from './store.ts';
export type { ListedTask, TaskRead } from './store.ts';
export { approvalStatements } from './approval-store.ts';
export type { ApprovalAnswer, ApprovalRow, ApprovalStatements } from './approval-store.ts';
