import type { JobQueue } from '../core/jobs.ts';
import type { TriggerJob, TriggerJobs } from './ports.ts';
import type { TriggerRunner } from './runner.ts';
import { SWEEP_MS } from './run.ts';

export const TRIGGER_QUEUE = 'triggers';
/**
 * A job only claims a run and sends its prompt (the reply is followed outside it), so it takes
 * milliseconds: a minute is far past any, and an instance that dies with one has it taken over.
 */
const RUN_SECONDS = 60;
/**
 * Jobs this instance handles at once. Each takes milliseconds, and those running together share
 * their statements (`runner-statements.ts`), so this is how many due at one moment start together:
 * the queue claims them in batches of a sixteenth of it a poll (`src/jobs/pg-boss.ts`), so a
 * hundred due in one second are claimed by the first two polls after it, not spread over a second
 * of polls.
 */
const CONCURRENCY = 1024;

/** The triggers' jobs on the queue: each handed to `at` goes to the runner of one instance. */
export const triggerJobs = (queue: JobQueue): TriggerJobs => ({
  async at(at, job) {
    await queue.send(TRIGGER_QUEUE, job, { at });
  },
});

/**
 * Declares the queue and works it on this instance, then plans what earlier processes left
 * unplanned, at once and every `SWEEP_MS`; returns how to stop sweeping.
 */
export async function workTriggers(queue: JobQueue, runner: TriggerRunner, log: { error(obj: unknown, msg?: string): void }) {
  await queue.declare({ name: TRIGGER_QUEUE, retries: 5, retryDelaySeconds: 1, runSeconds: RUN_SECONDS });
  await queue.work<TriggerJob>(TRIGGER_QUEUE, { concurrency: CONCURRENCY }, (job) => runner.handle(job.data));
  const sweep = () => runner.sweep().catch((err) => log.error({ err }, 'triggers could not be planned'));
  await sweep();
  const timer = setInterval(sweep, SWEEP_MS);
  timer.unref();
  return () => clearInterval(timer);
}
