import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { pgBossQueue } from '../../src/jobs/pg-boss.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { trackChild } from '../helpers/process.ts';
import { root } from '../helpers/service-command.ts';
import { setUp } from '../helpers/set-up.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { until } from '../helpers/until.ts';
import { jobs, spec, worked } from './support.ts';

describe('the job queue, with two instances over one PostgreSQL', () => {
  let url: string;
  let apps: TestApp[];
  setUp(async (start) => {
    url = (await start.service(freshPostgresDatabase(), (db) => db.drop())).url;
    const shared = { kind: 'postgres' as const, url };
    apps = [await start.app({ jobs }, shared), await start.app({ jobs }, shared)];
  });

  it('gives each job to one instance only', async () => {
    const name = 'claims';
    const runs = await Promise.all(
      apps.map(async (app) => {
        await app.services.jobs.declare({ name, ...spec });
        return worked<{ n: number }>(app.services.jobs, name, 4, () => new Promise((resolve) => setTimeout(resolve, 20)));
      }),
    );
    const sent = await Promise.all(Array.from({ length: 40 }, (_, n) => apps[n % 2]!.services.jobs.send(name, { n })));
    await until('every job to run', () => runs.flat().length >= sent.length, { timeoutMs: 30_000 });
    const ran = runs.flat().map((r) => r.id);
    expect(ran.sort()).toEqual([...sent].sort());
    // Both instances took part: what each ran, the other did not.
    expect(runs[0]!.length).toBeGreaterThan(0);
    expect(runs[1]!.length).toBeGreaterThan(0);
  });

  it('shares jobs due at one moment between the instances, rather than the quicker one taking them all', async () => {
    const name = 'due-together';
    const concurrency = 4;
    const runs = await Promise.all(
      apps.map(async (app) => {
        await app.services.jobs.declare({ name, ...spec });
        return worked<{ n: number }>(app.services.jobs, name, concurrency);
      }),
    );
    // Rounds of as many jobs as one instance runs at once, each round due at one moment.
    const rounds = 3;
    const start = Date.now() + 1_000;
    for (let round = 0; round < rounds; round++) {
      const at = new Date(start + round * 1_000);
      await Promise.all(
        Array.from({ length: concurrency }, (_, i) => apps[0]!.services.jobs.send(name, { n: round * concurrency + i }, { at })),
      );
    }
    await until('every job to run', () => runs.flat().length >= rounds * concurrency, { timeoutMs: 20_000 });
    const total = rounds * concurrency;
    for (const ran of runs) expect(ran.length, JSON.stringify(runs.map((r) => r.length))).toBeGreaterThanOrEqual(total / 4);
  });

  /** A worker process on `queue` that takes its jobs and never finishes one (`test/helpers/job-worker.ts`), once it is ready. */
  async function stuckWorker(queue: string, ...spec: string[]) {
    const worker = trackChild(
      spawn(
        process.execPath,
        ['--import', 'tsx', fileURLToPath(new URL('../helpers/job-worker.ts', import.meta.url)), url, queue, ...spec],
        {
          cwd: root,
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      ),
    );
    const seen = { output: '' };
    worker.stdout.on('data', (d) => (seen.output += d));
    worker.stderr.on('data', (d) => (seen.output += d));
    await until('the worker to start', () => seen.output.includes('ready'), { timeoutMs: 60_000 });
    return { worker, seen };
  }

  it("tries a killed instance's job again on another, within seconds", async () => {
    const name = 'killed';
    const { worker, seen } = await stuckWorker(name);
    const output = () => seen.output;
    const queue = apps[0]!.services.jobs;
    await queue.declare({ name, ...spec });
    const id = await queue.send(name, { n: 7 });
    await until('the worker to take the job', () => output().includes(`took ${id}`), { timeoutMs: 10_000 });
    worker.kill('SIGKILL');
    const killedAt = Date.now();
    const runs = await worked<{ n: number }>(queue, name);
    // 10 s without a heartbeat (pg-boss's least), then the next supervision pass and poll.
    await until('another instance to take the job', () => runs.length, { timeoutMs: 30_000 });
    expect(runs).toEqual([{ id, data: { n: 7 }, retry: 1, at: expect.any(Number) }]);
    expect(runs[0]!.at - killedAt).toBeLessThan(20_000);
  });

  it('hands a job whose instance died on its last try to its givenUpTo queue, with its data, and does not run it again', async () => {
    const [name, givenUp] = ['killed-last', 'killed-last-given-up'];
    const queue = apps[0]!.services.jobs;
    await queue.declare({ name: givenUp, ...spec });
    const { worker, seen } = await stuckWorker(name, '0', givenUp);
    const id = await queue.send(name, { n: 8 });
    await until('the worker to take the job', () => seen.output.includes(`took ${id}`), { timeoutMs: 10_000 });
    worker.kill('SIGKILL');
    const [runs, givenUpRuns] = [await worked<{ n: number }>(queue, name), await worked<{ n: number }>(queue, givenUp)];
    await until('the given-up job to run', () => givenUpRuns.length, { timeoutMs: 30_000 });
    expect(givenUpRuns).toEqual([{ id: expect.any(String), data: { n: 8 }, retry: 0, at: expect.any(Number) }]);
    expect(runs).toEqual([]);
  });
});

describe('the job queue, starting while its database is away', () => {
  let url: string;
  let proxy: TcpProxy;
  setUp(async (start) => {
    url = (await start.service(freshPostgresDatabase(), (db) => db.drop())).url;
    // An app migrates the database (the queue's schema is one of parley's migrations).
    await start.app({ jobs }, { kind: 'postgres', url });
    const target = new URL(url);
    proxy = await start.service(startTcpProxy({ host: target.hostname, port: Number(target.port) }));
  });

  it('keeps trying, starts once the database is back, and then runs jobs', async () => {
    await proxy.cut();
    const warnings: string[] = [];
    const log = {
      warn: (_: unknown, msg: string) => warnings.push(msg),
      error: (_: unknown, msg: string) => warnings.push(`error: ${msg}`),
    };
    const queue = pgBossQueue({ kind: 'postgres', url: proxy.through(url) }, { ...jobs, takeoverS: 10, poolSize: 2 }, log);
    try {
      let started = false;
      const starting = queue.start().then(() => (started = true));
      await until(
        'a second try to find the database away',
        () => warnings.filter((w) => w.startsWith('the job queue cannot reach the database to start')).length >= 2,
      );
      expect(started).toBe(false);
      await proxy.restore();
      await starting;
      await queue.declare({ name: 'after-a-blip', ...spec });
      const runs = await worked<{ n: number }>(queue, 'after-a-blip');
      await queue.send('after-a-blip', { n: 1 });
      await until('the job to run', () => runs.length === 1);
      expect(runs[0]!.data).toEqual({ n: 1 });
      expect(warnings.filter((w) => w.startsWith('error'))).toEqual([]);
    } finally {
      await queue.stop(1_000);
    }
  });
});
