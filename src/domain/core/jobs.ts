/**
 * The job queue the domain runs background work on: work that must happen later (at a time, or
 * after a delay), once, on whichever instance is up. The adapter (`src/jobs/`) keeps jobs in the
 * database, so a job outlives the process that sent it; an instance claims a job for itself alone,
 * and a job whose instance died is taken over by another (`docs/jobs.md`).
 */

/** How a queue treats its jobs; declared once per queue, before anything is sent to it or worked from it. */
export interface QueueSpec {
  name: string;
  /**
   * At most one job of a key waits, and jobs of one key never run at the same time: sending a job
   * while another of its key waits sends nothing (`send` answers null). Jobs without a key share
   * the key ''.
   */
  oneAtATimePerKey?: boolean;
  /** Tries after the first, when the handler throws or its instance dies mid-way. */
  retries: number;
  /** Seconds before a failed try is tried again. */
  retryDelaySeconds: number;
  /**
   * How long a job may run before it counts as abandoned and goes to another instance, in
   * seconds. A running job's instance says it is alive every few seconds, so one that dies has its
   * jobs taken over within about `takeoverSeconds` (`docs/jobs.md`), however long `runSeconds` is.
   */
  runSeconds: number;
  /**
   * A queue (declared before this one) that gets each job of this one that ran out of tries,
   * with its data, however its last try failed: its handler threw, or its instance died during
   * it and the queue's supervision failed it. Work it to act on what was given up.
   */
  givenUpTo?: string;
}

export interface SendOptions {
  /** See `QueueSpec.oneAtATimePerKey`. */
  key?: string;
  /** Not before this time. */
  at?: Date;
}

/** A job as its handler gets it. */
export interface Job<T> {
  id: string;
  data: T;
  /** 0 on the first try. */
  retry: number;
  /** Aborted when the job is given up here (shutdown past its grace period): stop and let it go to another instance. */
  signal: AbortSignal;
}

export interface WorkOptions {
  /** Jobs of this queue one instance runs at once. */
  concurrency: number;
}

export interface JobQueue {
  /** Declares a queue (again, with the same spec, is harmless). */
  declare(spec: QueueSpec): Promise<void>;
  /** Sends a job; its id, or null when `key` already has a job waiting in a `oneAtATimePerKey` queue. */
  send<T extends object>(queue: string, data: T, options?: SendOptions): Promise<string | null>;
  /**
   * Runs `handler` for the queue's jobs on this instance. A handler that resolves completes the
   * job; one that throws fails the try (tried again per the queue's spec).
   */
  work<T extends object>(queue: string, options: WorkOptions, handler: (job: Job<T>) => Promise<void>): Promise<void>;
  /** Cancels the jobs of `key` still waiting (not those running); how many. */
  cancelWaiting(queue: string, key: string): Promise<number>;
  /** Whether a job of `key` is waiting. */
  waiting(queue: string, key: string): Promise<boolean>;
}
