// A worker of the job queue in a process of its own, for tests that kill one mid-job: it takes the
// jobs of a queue on the PostgreSQL database given, says which (`took <id>`), and never finishes one.
// Arguments: the database's URL, the queue, and optionally its retries (2) and its `givenUpTo` queue.
import { pgBossQueue } from '../../src/jobs/pg-boss.ts';

const [url, queue, retries = '2', givenUpTo] = process.argv.slice(2) as [string, string, string?, string?];
const jobs = pgBossQueue({ kind: 'postgres', url }, { pollMs: 500, superviseS: 1, takeoverS: 10, poolSize: 2 }, console);
await jobs.declare({ name: queue, retries: Number(retries), retryDelaySeconds: 0, runSeconds: 600, givenUpTo });
await jobs.work<{ n: number }>(queue, { concurrency: 1 }, async (job) => {
  console.log(`took ${job.id}`);
  await new Promise(() => {});
});
console.log('ready');
