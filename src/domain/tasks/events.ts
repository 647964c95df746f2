import type { TaskStatus } from '../../generated/prisma/enums.ts';

/** JSON as a tool returns it: a task's result is what its tool produced (urls, text, ids). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A task as its owner's feed shows it when it is created: what it runs and what it holds, not its arguments. */
export interface TaskFeedView {
  id: string;
  tool: string;
  outputType: string | null;
  status: TaskStatus;
  /** Manna held for it (charged when it completes, returned otherwise). */
  cost: number;
  agentId: string | null;
  sessionId: string | null;
  createdAt: string;
}

/** What a task's owner is told as it goes, by type. */
export interface TaskEventPayloads {
  task_created: { taskId: string; task: TaskFeedView };
  /** It got its turn and its tool started. */
  task_started: { taskId: string };
  /** How far it is, from 0 to 1, with what it is doing when the tool says. */
  task_progress: { taskId: string; progress: number; message: string | null };
  task_completed: { taskId: string; result: JsonValue; cost: number };
  task_failed: { taskId: string; error: string };
  task_cancelled: { taskId: string };
}

export type TaskEventPayload = { [T in keyof TaskEventPayloads]: { type: T } & TaskEventPayloads[T] }[keyof TaskEventPayloads];

/** Where a task's changes go: its owner's feed. */
export interface TaskEvents {
  publish(userId: string, event: TaskEventPayload): Promise<unknown>;
}
