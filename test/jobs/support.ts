import type { Job, JobQueue } from '../../src/domain/core/jobs.ts';

/** Quick polling and supervision, so a test waits no longer than the rule it checks. */
export const jobs = { pollMs: 500, superviseS: 1 };
export const spec = { retries: 2, retryDelaySeconds: 0, runSeconds: 600 };

/** Works `queue` and records each job it runs. */
export async function worked<T extends object>(queue: JobQueue, name: string, concurrency = 2, handle?: (job: Job<T>) => Promise<void>) {
  const runs: { id: string; data: T; retry: number; at: number }[] = [];
  await queue.work<T>(name, { concurrency }, async (job) => {
    runs.push({ id: job.id, data: job.data, retry: job.retry, at: Date.now() });
    await handle?.(job);
  });
  return runs;
}
