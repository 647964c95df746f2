import type { FeedEventPayload, feedFamilies } from '../core/feed-events.ts';

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

/** What a trigger's owner is told, on their feed (`core/feed-events.ts`, the trigger family). */
export type TriggerEvent = Extract<FeedEventPayload, { type: (typeof feedFamilies.trigger)[number] }>;

/** Where a user's trigger events go (their feed). */
export interface TriggerEvents {
  publish(userId: string, event: TriggerEvent): Promise<unknown>;
}
