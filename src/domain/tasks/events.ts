import type { FeedEventPayload } from '../core/feed-events.ts';

/** The events of the task family, as published on their owner's feed. */
export type TaskEventPayload = Extract<FeedEventPayload, { type: `task_${string}` }>;

/** Where a task's changes go: its owner's feed (`bus.feeds`). */
export interface TaskEvents {
  publish(userId: string, event: TaskEventPayload): Promise<unknown>;
}
