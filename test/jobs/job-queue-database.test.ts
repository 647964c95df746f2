import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgBossQueue, type RunningJobQueue } from '../../src/jobs/pg-boss.ts';
import { domainConfig, domainDatabase, quietLog } from '../helpers/domain-database.ts';
import { until } from '../helpers/until.ts';
import { jobs, spec, worked } from './support.ts';

/**
 * The job queue over the database the service runs on (the embedded one through its thread, or
 * PostgreSQL), opened and worked as the app does, with no app. Several instances, a killed one and
 * a database away are in job-queue.test.ts: those need processes.
 */
describe('the job queue, on the database the service runs on', () => {
  const t = domainDatabase();
  let queue: RunningJobQueue;
  beforeAll(async () => {
    queue = pgBossQueue(t.jobs, { ...domainConfig.jobs, ...jobs }, quietLog);
    await queue.start();
  });
  // Registered after the database's: runs before it closes.
  afterAll(() => queue?.stop(0));

  it('runs a job sent now, once', async () => {
    await queue.declare({ name: 'now', ...spec });
    const runs = await worked<{ n: number }>(queue, 'now');
    const id = await queue.send('now', { n: 1 });
    await until('the job to run', () => runs.length);
    expect(runs).toEqual([{ id, data: { n: 1 }, retry: 0, at: expect.any(Number) }]);
  });

  it('runs a job sent for a time at that time, not before', async () => {
    await queue.declare({ name: 'later', ...spec });
    const runs = await worked<{ n: number }>(queue, 'later');
    const at = new Date(Date.now() + 1_500);
    await queue.send('later', { n: 2 }, { at });
    await until('the job to run', () => runs.length, { timeoutMs: 10_000 });
    expect(runs[0]!.at).toBeGreaterThanOrEqual(at.getTime());
    expect(runs[0]!.data).toEqual({ n: 2 });
  });

  it('keeps one job of a key waiting: a second is not sent, and cancelling the first leaves none', async () => {
    await queue.declare({ name: 'keyed', oneAtATimePerKey: true, ...spec });
    const at = new Date(Date.now() + 60_000);
    const first = await queue.send('keyed', { n: 1 }, { key: 'session-1', at });
    expect(first).toEqual(expect.any(String));
    expect(await queue.send('keyed', { n: 2 }, { key: 'session-1', at })).toBeNull();
    // Another key is another job.
    expect(await queue.send('keyed', { n: 3 }, { key: 'session-2', at })).toEqual(expect.any(String));
    expect(await queue.waiting('keyed', 'session-1')).toBe(true);
    expect(await queue.cancelWaiting('keyed', 'session-1')).toBe(1);
    expect(await queue.waiting('keyed', 'session-1')).toBe(false);
    expect(await queue.waiting('keyed', 'session-2')).toBe(true);
    expect(await queue.send('keyed', { n: 4 }, { key: 'session-1', at })).toEqual(expect.any(String));
  });

  it('tries a job again when its handler throws, as the queue says', async () => {
    await queue.declare({ name: 'flaky', ...spec, retries: 1 });
    const runs = await worked<{ n: number }>(queue, 'flaky', 1, async (job) => {
      if (job.retry === 0) throw new Error('first try fails');
    });
    await queue.send('flaky', { n: 5 });
    await until('the second try', () => runs.length === 2, { timeoutMs: 10_000 });
    expect(runs.map((r) => r.retry)).toEqual([0, 1]);
  });

  it('hands a job whose last try threw to its givenUpTo queue, with its data, once', async () => {
    await queue.declare({ name: 'hopeless-given-up', ...spec });
    await queue.declare({ name: 'hopeless', ...spec, retries: 1, givenUpTo: 'hopeless-given-up' });
    const runs = await worked<{ n: number }>(queue, 'hopeless', 1, async () => {
      throw new Error('every try fails');
    });
    const givenUp = await worked<{ n: number }>(queue, 'hopeless-given-up');
    await queue.send('hopeless', { n: 6 });
    await until('the given-up job', () => givenUp.length, { timeoutMs: 10_000 });
    expect(runs.map((r) => r.retry)).toEqual([0, 1]);
    expect(givenUp.map((r) => r.data)).toEqual([{ n: 6 }]);
  });
});
