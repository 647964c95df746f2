import type { DeploymentPlatform, TriggerStatus } from './vocabulary.ts';
import type { Numbered } from './bus.ts';

/**
 * What a user's own feed tells them, independent of transport: changes to their triggers, tasks
 * and deployments, which belong to the user rather than to one session. Everything is plain JSON
 * (ids as strings, dates as ISO strings) because events cross processes and are kept for replay.
 *
 * Fields are named and typed one by one, never a row or a settings object passed through: an
 * event is shown to whoever watches the feed and kept in the replay log, so a secret (a bot
 * token, a deployment's config) cannot reach one by a field added to a table later.
 */

/** A trigger as its owner's feed shows it after a change: its schedule's state, not its prompt or context. */
export interface TriggerFeedView {
  id: string;
  agentId: string;
  name: string;
  status: TriggerStatus;
  lastRunTime: string | null;
  /** UTC; null when it runs only by hand or has finished. */
  nextScheduledRun: string | null;
  errorCount: number;
  lastError: string | null;
}

/** Why a trigger stopped firing by itself. */
export type TriggerPauseReason = 'failures' | 'stuck' | 'owner';

export type TaskStatus = 'pending' | 'awaiting_approval' | 'running' | 'completed' | 'failed' | 'cancelled';

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

/** A creation a task made, as its feed names it: its id and where it is. */
export interface TaskOutputView {
  creationId: string;
  url: string;
  thumbnail: string | null;
}

/** JSON as a tool returns it: a task's result is what its tool produced (urls, text, ids). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export type DeploymentState = 'running' | 'stopped' | 'invalid';

/**
 * Every event of a user's feed, by type: the one list of them. A transport that shows a family
 * of them (a trigger's, a task's) maps it with a record keyed by those types, so an event added
 * here does not compile until each transport showing its family says how to show it.
 */
export interface FeedEventPayloads {
  /** A run began: on schedule (`scheduledFor`, the occurrence it is for) or by hand (null). */
  trigger_run_started: { triggerId: string; agentId: string; runId: string; scheduledFor: string | null };
  /** A run's prompt was answered: the session it went into and the agent's reply. */
  trigger_run_completed: { triggerId: string; agentId: string; runId: string; sessionId: string; messageId: string };
  /** A run failed; `errorCount` counts failures in a row (two pause the trigger). */
  trigger_run_failed: { triggerId: string; agentId: string; runId: string; reason: string; errorCount: number };
  /** The trigger stopped firing until its owner resumes it, and why (`message` in words). */
  trigger_paused: { triggerId: string; agentId: string; reason: TriggerPauseReason; message: string };
  /** Past its `end_date`: it will not run again. */
  trigger_finished: { triggerId: string; agentId: string };
  /** Created, changed by its owner, or deleted: `trigger` is its state after (or last, when deleted). */
  trigger_changed: { triggerId: string; change: 'created' | 'updated' | 'deleted'; trigger: TriggerFeedView };
  task_created: { taskId: string; task: TaskFeedView };
  /** It got its turn (a task made by itself) or its hold (a reply's tool call), and its tool is running. */
  task_started: { taskId: string };
  /** How far it is, from 0 to 1, with what it is doing when the tool says. */
  task_progress: { taskId: string; progress: number; message: string | null };
  /** Its tool's answer, the creations it made, and what it was charged. */
  task_completed: { taskId: string; result: JsonValue; outputs: TaskOutputView[]; cost: number };
  /** Its hold (if any) was returned. */
  task_failed: { taskId: string; error: string };
  task_cancelled: { taskId: string };
  /**
   * A reply's tool call of yours waits for your yes (`POST /v2/sessions/{sessionId}/approvals/{taskId}`,
   * `settleToolApproval`): what it would run and cost, and when it counts as denied.
   */
  tool_approval_requested: {
    taskId: string;
    sessionId: string;
    messageId: string;
    agentId: string;
    tool: string;
    args: JsonValue;
    cost: number;
    expiresAt: string;
  };
  /**
   * A deployment started, stopped, was found invalid (a revoked token) or was deleted, with the
   * last error it met. A deleted one's event is its last, with the state it ended in.
   */
  deployment_state: {
    deploymentId: string;
    agentId: string;
    platform: DeploymentPlatform;
    state: DeploymentState;
    valid: boolean;
    lastError: string | null;
    deleted: boolean;
  };
  /**
   * The service turned one of your webhook endpoints off: every delivery to it failed for days
   * (`reason` says how long). Nothing more is sent to it until you turn it on again.
   */
  webhook_disabled: { webhookId: string; url: string; reason: string; disabledAt: string };
}

export type FeedEventType = keyof FeedEventPayloads;

export type FeedEventPayload = { [T in FeedEventType]: { type: T } & FeedEventPayloads[T] }[FeedEventType];

/** An event as published: numbered per user (`seq` only grows), with the user it belongs to and its time. */
export type FeedEvent = FeedEventPayload & Numbered & { userId: string };

/** One type of feed event as published. */
export type FeedEventOf<T extends FeedEventType> = Extract<FeedEvent, { type: T }>;

/** The event types of each family, for a transport showing one family (and for narrowing a watch to it). */
export const feedFamilies = {
  trigger: ['trigger_run_started', 'trigger_run_completed', 'trigger_run_failed', 'trigger_paused', 'trigger_finished', 'trigger_changed'],
  task: ['task_created', 'task_started', 'task_progress', 'task_completed', 'task_failed', 'task_cancelled', 'tool_approval_requested'],
  deployment: ['deployment_state'],
  webhook: ['webhook_disabled'],
} as const satisfies Record<string, readonly FeedEventType[]>;
