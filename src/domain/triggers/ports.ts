import type { TriggerStatus } from '../../generated/prisma/enums.ts';

/**
 * What the triggers ask of the job queue: to be handed a job once its time has come, by one
 * instance, surviving restarts. Each job is safe to receive more than once or late (the rules
 * claim an occurrence in the database, so a second delivery finds it taken).
 */
export type TriggerJob =
  /** The occurrence `scheduledFor` (ISO, UTC) of a trigger is due. */
  | { kind: 'occurrence'; triggerId: string; scheduledFor: string }
  /** A run's time limit: settle it from its reply, or fail it as stuck. */
  | { kind: 'release'; triggerId: string; runId: string };

export interface TriggerJobs {
  /** Hands `job` to `handle` (on any instance) once `at` has come; at once when it is past. */
  at(at: Date, job: TriggerJob): Promise<void>;
}

/** A trigger as its owner's feed shows it after a change: its schedule's state, not its prompt or context. */
export interface TriggerFeedView {
  id: string;
  agentId: string;
  name: string;
  status: TriggerStatus;
  lastRunTime: string | null;
  nextScheduledRun: string | null;
  errorCount: number;
  lastError: string | null;
}

/** Why a trigger stopped firing by itself. */
export type TriggerPauseReason = 'failures' | 'stuck' | 'owner';

/** What a trigger's owner is told. */
export type TriggerEvent =
  | { type: 'trigger_run_started'; triggerId: string; agentId: string; runId: string; scheduledFor: string | null }
  | { type: 'trigger_run_completed'; triggerId: string; agentId: string; runId: string; sessionId: string; messageId: string }
  | { type: 'trigger_run_failed'; triggerId: string; agentId: string; runId: string; reason: string; errorCount: number }
  | { type: 'trigger_paused'; triggerId: string; agentId: string; reason: TriggerPauseReason; message: string }
  | { type: 'trigger_finished'; triggerId: string; agentId: string }
  | { type: 'trigger_changed'; triggerId: string; change: 'created' | 'updated' | 'deleted'; trigger: TriggerFeedView };

/** Where a user's trigger events go (their feed). */
export interface TriggerEvents {
  publish(userId: string, event: TriggerEvent): Promise<unknown>;
}
