// A worker of the job queue in a process of its own, for tests that kill one mid-job: it takes the
// jobs of a queue on the PostgreSQL database given, says which (`took <id>`), and never finishes one.
import { pgBossQueue } from '../../src/jobs/pg-boss.ts';

const [url, queue] = process.argv.slice(2) as [string, string];
const jobs = pgBossQueue({ kind: 'postgres', url }, { pollMs: 500, superviseS: 1, takeoverS: 10, poolSize: 2 }, console);
await jobs.declare({ name: queue, retries: 2, retryDelaySeconds: 0, runSeconds: 600 });
await jobs.work<{ n: number }>(queue, { concurrency: 1 }, async (job) => {
  console.log(`took ${job.id}`);
  await new Promise(() => {});
});
console.log('ready');
