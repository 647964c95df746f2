import { randomUUID } from 'node:crypto';
import type { Job, JobQueue, QueueSpec } from '../../src/domain/core/jobs.ts';

interface Waiting {
  id: string;
  queue: string;
  data: object;
  key: string | undefined;
  at: Date | undefined;
  retry: number;
}

/**
 * The job queue's promises kept in memory, for testing rules without a database: a key has at
 * most one job waiting in a `oneAtATimePerKey` queue, and nothing runs until the test says so
 * (`runDue`), so a test decides when time has passed.
 */
export function inMemoryJobQueue() {
  const specs = new Map<string, QueueSpec>();
  const handlers = new Map<string, (job: Job<object>) => Promise<void>>();
  const waiting: Waiting[] = [];
  const queue: JobQueue = {
    async declare(spec) {
      specs.set(spec.name, spec);
    },
    async send(name, data, options = {}) {
      if (!specs.has(name)) throw new Error(`queue ${name} was not declared`);
      if (specs.get(name)!.oneAtATimePerKey && waiting.some((w) => w.queue === name && w.key === (options.key ?? ''))) return null;
      const id = randomUUID();
      waiting.push({ id, queue: name, data, key: options.key ?? '', at: options.at, retry: 0 });
      return id;
    },
    async work(name, _options, handler) {
      handlers.set(name, handler as (job: Job<object>) => Promise<void>);
    },
    async cancelWaiting(name, key) {
      const before = waiting.length;
      waiting.splice(0, waiting.length, ...waiting.filter((w) => !(w.queue === name && w.key === key)));
      return before - waiting.length;
    },
    async waiting(name, key) {
      return waiting.some((w) => w.queue === name && w.key === key);
    },
  };
  const dueBy = (now: Date) => waiting.filter((w) => !w.at || w.at.getTime() <= now.getTime());
  /**
   * A failed try: the job waits again for its queue's `retryDelaySeconds` while it has tries left;
   * after its last, it goes to the queue's `givenUpTo` queue, if any.
   */
  const failTry = (job: Waiting, now: Date) => {
    const spec = specs.get(job.queue)!;
    if (job.retry < spec.retries)
      waiting.push({ ...job, retry: job.retry + 1, at: new Date(now.getTime() + spec.retryDelaySeconds * 1000) });
    else if (spec.givenUpTo)
      waiting.push({ id: randomUUID(), queue: spec.givenUpTo, data: job.data, key: job.key, at: undefined, retry: 0 });
  };
  return {
    queue,
    /** The jobs waiting, in the order they were sent. */
    waiting: () => waiting.map((w) => ({ ...w })),
    /**
     * Runs, one at a time, each job due by `now` (taking it off the list first, as a claim does).
     * A handler that throws fails its try (`failTry`), and the error is thrown on.
     */
    async runDue(now: Date) {
      const due = dueBy(now);
      for (const job of due) {
        waiting.splice(waiting.indexOf(job), 1);
        try {
          await handlers.get(job.queue)!({ id: job.id, data: job.data, retry: job.retry, signal: new AbortController().signal });
        } catch (err) {
          failTry(job, now);
          throw err;
        }
      }
      return due.length;
    },
    /**
     * The instance that claimed each job of `queue` due by `now` dies before its handler ends: the
     * queue's supervision fails the try (`failTry`), and no handler of this queue sees the end.
     */
    abandonDue(queue: string, now: Date) {
      const due = dueBy(now).filter((w) => w.queue === queue);
      for (const job of due) {
        waiting.splice(waiting.indexOf(job), 1);
        failTry(job, now);
      }
      return due.length;
    },
  };
}
