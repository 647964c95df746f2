import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type DataLoader from 'dataloader';
import { type Job as PgBossJob, PgBoss } from 'pg-boss';
import type { JobsConfig } from '../config.ts';
import type { JobsConnection } from '../db/database.ts';
import type { Job, JobQueue, QueueSpec, SendOptions, WorkOptions } from '../domain/core/jobs.ts';
import { coalesced } from '../domain/core/coalesce.ts';
import { isDatabaseUnavailable } from '../domain/core/stores/prisma-errors.ts';

/**
 * Pollers an instance runs for one queue at most. Each polls every `JOBS_POLL_MS` even when idle,
 * so more would cost idle queries; a queue that runs more jobs at once claims them in batches.
 */
const MOST_POLLERS = 16;

/** The schema pg-boss keeps its tables in; made by our migration `20261201000000_jobs_autonomy`. */
export const JOBS_SCHEMA = 'pgboss';

export interface RunningJobQueue extends JobQueue {
  /** Opens the queue; the first call of any other method does too. */
  start(): Promise<void>;
  /**
   * Stops claiming jobs, lets those running here finish for up to `graceMs`, then gives up the
   * rest: each is failed, so another instance tries it again (per its queue's `retries`).
   */
  stop(graceMs: number): Promise<void>;
}

/**
 * Opening the queue: on first use (a process that never uses it, as most CLI commands, never
 * opens it), and each step of starting (opening, declaring a queue, before working one) tried
 * again while the database cannot be reached: a blip while an instance starts must not leave it
 * without its workers until it is restarted. Each step is safe to repeat. Sending is not retried:
 * its caller is told the database is away.
 */
function opening(boss: PgBoss, warn: (obj: unknown, msg: string) => void) {
  let starting: Promise<unknown> | undefined;
  let opened = false;
  let stopped = false;
  return {
    async ready() {
      opened = true;
      // A start that failed is not kept: the next call starts again (pg-boss allows it).
      starting ??= boss.start().catch((err) => {
        starting = undefined;
        throw err;
      });
      await starting;
    },

    async throughOutages(step: () => Promise<void>) {
      for (let waitMs = 250; ; waitMs = Math.min(waitMs * 2, 10_000)) {
        // Not after a stop that came while it waited: the queue would start behind it.
        if (stopped) throw new Error('the job queue stopped before it could start');
        try {
          return await step();
        } catch (err) {
          if (stopped || !isDatabaseUnavailable(err)) throw err;
          warn({ err, retryInMs: waitMs }, 'the job queue cannot reach the database to start; trying again');
          await sleep(waitMs, undefined, { ref: false });
        }
      }
    },

    /** Ends the tries; whether the queue was opened, and so has something to stop. */
    async stop() {
      stopped = true;
      if (!opened) return false;
      await starting?.catch(() => {});
      return true;
    },
  };
}

/** A job to insert with others; its id chosen here, so each caller knows its own. */
interface UnkeyedJob {
  id: string;
  data: object;
  at?: Date;
}

/**
 * Sends unkeyed jobs: those sent to a queue while an insert to it is under way go together in
 * the next (a hundred triggers due at once each send a job, and on the embedded database each
 * statement waits for the one thread). Not for a keyed job, or any job of a one-at-a-time queue:
 * whether it is sent depends on the jobs waiting, which only `send` checks.
 */
function groupedInserts(boss: PgBoss) {
  const loaders = new Map<string, DataLoader<UnkeyedJob, string | null>>();
  return (queue: string, data: object, at: Date | undefined) => {
    let loader = loaders.get(queue);
    if (!loader) {
      loader = coalesced(async (jobs: readonly UnkeyedJob[]) => {
        await boss.insert(
          queue,
          jobs.map((j) => ({ id: j.id, data: j.data, startAfter: j.at })),
        );
        return new Map(jobs.map((j) => [j, j.id]));
      });
      loaders.set(queue, loader);
    }
    return loader.load({ id: randomUUID(), data, at });
  };
}

interface Log {
  error(obj: unknown, msg?: string): void;
  warn?(obj: unknown, msg?: string): void;
}

function connectionOptions(connection: JobsConnection, config: JobsConfig) {
  if (connection.kind === 'postgres')
    return { connectionString: connection.url, max: config.poolSize, application_name: 'parley-jobs', connectionTimeoutMillis: 5_000 };
  return { db: { executeSql: connection.executeSql }, backend: 'pglite' as const };
}

/**
 * The job queue on pg-boss (`docs/jobs.md`): jobs are rows of its tables, claimed with
 * `FOR UPDATE SKIP LOCKED`, so each is run by one instance at a time; a running job's instance
 * beats every `takeoverS / 2`, and one that stops beating has its jobs failed by the next
 * supervision pass of any instance and tried again.
 */
export function pgBossQueue(connection: JobsConnection, config: JobsConfig, log: Log): RunningJobQueue {
  const boss = new PgBoss({
    ...connectionOptions(connection, config),
    schema: JOBS_SCHEMA,
    // The schema is ours to create, in a migration: pg-boss only checks its version at start.
    createSchema: false,
    supervise: true,
    superviseIntervalSeconds: config.superviseS,
    // Expiry and lost heartbeats are found in the monitor's pass, which waits for both intervals.
    monitorIntervalSeconds: config.superviseS,
    // No cron schedules: our schedules are delayed jobs, sent by the rules that own them.
    schedule: false,
    registerInstance: false,
    // A rebuild of its indexes is DDL the embedded database would run inside the service.
    reindex: false,
  });
  // pino's methods need their logger as `this`.
  const warn = (obj: unknown, msg: string) => (log.warn ? log.warn(obj, msg) : log.error(obj, msg));
  // An outage is expected weather (the queue polls again once the database is back), not a fault.
  boss.on('error', (err) =>
    isDatabaseUnavailable(err) ? warn({ err }, 'the job queue cannot reach the database') : log.error({ err }, 'the job queue failed'),
  );
  boss.on('warning', (warning) => warn({ warning }, 'the job queue warns'));

  const open = opening(boss, warn);
  const heartbeatSeconds = config.takeoverS;
  /** Pollers not started yet (`work`); a stop cancels them. */
  const staggered = new Set<NodeJS.Timeout>();
  const insert = groupedInserts(boss);
  /** Queues whose jobs are sent one by one (`groupedInserts`). */
  const oneAtATime = new Set<string>();

  return {
    start: () => open.throughOutages(open.ready),

    async stop(graceMs) {
      for (const timer of staggered) clearTimeout(timer);
      staggered.clear();
      if (!(await open.stop())) return;
      await boss.stop({ graceful: true, timeout: graceMs, close: true });
    },

    async declare(spec: QueueSpec) {
      const options = {
        policy: spec.oneAtATimePerKey ? 'stately' : 'standard',
        retryLimit: spec.retries,
        retryDelay: spec.retryDelaySeconds,
        expireInSeconds: spec.runSeconds,
        heartbeatSeconds,
        // pg-boss refuses the key present and undefined.
        ...(spec.givenUpTo ? { deadLetter: spec.givenUpTo } : {}),
      };
      if (spec.oneAtATimePerKey) oneAtATime.add(spec.name);
      const { policy: _fixed, ...changeable } = options;
      await open.throughOutages(async () => {
        await open.ready();
        await boss.createQueue(spec.name, options);
        await boss.updateQueue(spec.name, changeable);
      });
    },

    async send(queue, data, options: SendOptions = {}) {
      await open.ready();
      if (options.key === undefined && !oneAtATime.has(queue)) return insert(queue, data, options.at);
      return boss.send(queue, data, { singletonKey: options.key, startAfter: options.at });
    },

    async work<T extends object>(queue: string, options: WorkOptions, handler: (job: Job<T>) => Promise<void>) {
      await open.throughOutages(open.ready);
      const pollers = Math.min(options.concurrency, MOST_POLLERS);
      // Each poller claims up to `batch` jobs a poll and runs them together, each settled on its
      // own: past MOST_POLLERS, concurrency comes from batches, not from more idle polling. A poll
      // that came back full polls again at once (many jobs due together are claimed as fast as they
      // run, not one batch a poller per `pollMs`); one that came back short waits as usual.
      const batch = Math.ceil(options.concurrency / pollers);
      const poll = {
        batchSize: batch,
        perJobResults: true as const,
        pollingIntervalSeconds: config.pollMs / 1000,
        burstWhenBatchFull: true,
      };
      const run = (jobs: PgBossJob<T>[]) =>
        Promise.all(
          jobs.map(async (job) => {
            try {
              await handler({ id: job.id, data: job.data, retry: job.retryCount, signal: job.signal });
              return { id: job.id, status: 'completed' as const };
            } catch (err) {
              return { id: job.id, status: 'failed' as const, output: err };
            }
          }),
        );
      await boss.work<T>(queue, poll, run);
      // pg-boss starts a `localConcurrency` of pollers in the same instant, and each then polls on a
      // fixed period: all of an instance's pollers tick together, and the instance whose tick comes
      // first after a due time claims every job due then, at every due time. Pollers started
      // `pollMs / pollers` apart tick in turn with the other instances', so work is shared by
      // batches (jobs due together that one batch holds still go to one poller: docs/jobs.md).
      for (let i = 1; i < pollers; i++) {
        const timer = setTimeout(
          () => {
            staggered.delete(timer);
            boss.work<T>(queue, poll, run).catch((err) => log.error({ err, queue }, 'a job poller could not start'));
          },
          (i * config.pollMs) / pollers,
        );
        timer.unref();
        staggered.add(timer);
      }
    },

    async cancelWaiting(queue, key) {
      await open.ready();
      const waiting = await boss.findJobs(queue, { key, queued: true });
      if (!waiting.length) return 0;
      // pg-boss cancels by id whatever has not finished: a job claimed between the two statements
      // is cancelled too, and its handler's end then settles nothing (handlers check their own rules).
      const result = await boss.cancel(
        queue,
        waiting.map((j) => j.id),
      );
      // pg-boss answers `{jobs, requested, affected}`; its declared type names none of them.
      return (result as { affected?: number }).affected ?? 0;
    },

    async waiting(queue, key) {
      await open.ready();
      return (await boss.findJobs(queue, { key, queued: true, limit: 1 })).length > 0;
    },
  };
}
