import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { startRedis } from '../helpers/redis.ts';
import { setUp } from '../helpers/set-up.ts';
import { until } from '../helpers/until.ts';

// Two instances of the built service, each a process of its own, on one PostgreSQL and one
// Redis, run triggers due every five seconds; whichever is writing replies is killed with
// SIGKILL; every occurrence still has exactly one run and one prompt. The waits are for what the
// database shows.
//
// Whichever instance polls first after a due time claims every occurrence due then (one batch),
// and pollers keep their phase, so one instance can take every group for the whole test (a CI
// run waited 30 s for the one it meant to kill). Killing whichever is writing makes that
// irrelevant. This test's app only watches: it creates the triggers, reads the database and, as
// a live instance, supervises the queue, but polls it once an hour, so it claims nothing.

const TRIGGER_COUNT = 12;
const EVERY_S = 5;
const settings = { minIntervalS: 1, perUser: 100, runTimeoutS: 120, lateGraceS: 60 };
const HEARTBEAT_MS = 500;
const processEnv = {
  LOG_LEVEL: 'warn',
  TRIGGER_MIN_INTERVAL_S: '1',
  TRIGGER_LATE_GRACE_S: String(settings.lateGraceS),
  JOBS_POLL_MS: '500',
  JOBS_SUPERVISE_S: '1',
  INSTANCE_HEARTBEAT_MS: String(HEARTBEAT_MS),
};

describe('triggers across two instances, one killed mid-way', () => {
  let app: TestApp;
  let instances: ServerProcess[];
  let redis: Redis;
  let llm: FakeOpenAI;
  let owner: TestUser;
  let triggerIds: string[];
  let killed: { instance: string; at: number };

  setUp(async (start) => {
    const db = await start.service(freshPostgresDatabase(), (d) => d.drop());
    const redisUrl = process.env.TEST_REDIS_URL ?? (await start.service(startRedis())).url;
    redis = await start.service(Promise.resolve(new Redis(redisUrl)), (r) => r.disconnect());
    // Replies long enough to be cut off: ten pieces 150 ms apart.
    llm = await start.fakeOpenAI({ tokens: Array.from({ length: 10 }, (_, i) => `piece ${i} `), delayMs: 150 });
    app = await start.app(
      {
        llm: { baseUrl: llm.baseUrl },
        triggers: settings,
        jobs: { pollMs: 3_600_000, superviseS: 1 },
        redisUrl,
        instanceHeartbeatMs: HEARTBEAT_MS,
      },
      { kind: 'postgres', url: db.url },
    );
    const env = { ...processEnv, DATABASE_URL: db.url, REDIS_URL: redisUrl, LLM_BASE_URL: llm.baseUrl };
    instances = await Promise.all([startServerProcess(env), startServerProcess(env)]);
    for (const instance of instances)
      await until('an instance to answer', async () => (await fetch(`${instance.url}/healthz`).catch(() => null))?.ok, {
        timeoutMs: 60_000,
      });
    owner = await app.createUser('owner');
    const agent = await fixtures(app).agent(owner);
    triggerIds = [];
    for (let i = 0; i < TRIGGER_COUNT; i++) {
      const made = await app.rest('POST', `/v2/agents/${agent.id}/triggers`, {
        key: owner.apiKey,
        body: { name: `T${i}`, prompt: `Occurrence check ${i}`, schedule: { second: `*/${EVERY_S}` } },
      });
      expect(made.status, JSON.stringify(made.body)).toBe(200);
      triggerIds.push(made.body.triggerId);
    }
  });

  /** The instances that wrote replies to the triggers' prompts. */
  const writers = async () =>
    new Set(
      (await app.db.message.findMany({ where: { role: 'assistant', session: { ownerId: owner.id } }, select: { instance: true } })).map(
        (m) => m.instance,
      ),
    );

  it('an instance running occurrences is killed while writing their replies', async () => {
    // Killed with every run's reply under way: a run killed before it links its reply is taken
    // over only after JOBS_TAKEOVER_S (the rules' own test, test/rules/triggers.test.ts), too slow to wait for here.
    const writer = await until('an instance to be writing replies, every run linked to its reply', async () => {
      const [writing, unlinked] = await Promise.all([
        app.db.message.findFirst({ where: { role: 'assistant', status: 'streaming', session: { ownerId: owner.id } } }),
        app.db.triggerRun.count({ where: { triggerId: { in: triggerIds }, status: 'running', messageId: null } }),
      ]);
      return unlinked === 0 ? writing?.instance : null;
    });
    // Each instance keeps its process id under its heartbeat key.
    const pid = Number(await redis.get(`parley:instance:${writer}`));
    const target = instances.find((i) => i.child.pid === pid);
    expect(target, `the process of instance ${writer}`).toBeDefined();
    target!.child.kill('SIGKILL');
    await target!.exited;
    killed = { instance: writer, at: Date.now() };
  });

  it('every occurrence due until after the kill has run, once, with one prompt', async () => {
    // Each trigger's first occurrence due after the kill (at most EVERY_S later) is the survivor's to
    // run; waiting for a later one only spends the test's time.
    const horizon = killed.at;
    const runs = await until(
      'the occurrences until after the kill to have settled runs',
      async () => {
        const all = await app.db.triggerRun.findMany({ where: { triggerId: { in: triggerIds } }, orderBy: { scheduledFor: 'asc' } });
        const settled = triggerIds.every((id) =>
          all.some((r) => r.triggerId === id && r.scheduledFor!.getTime() >= horizon && r.status !== 'running'),
        );
        return settled ? all : null;
      },
      { timeoutMs: 28_000, everyMs: 250 },
    );
    // Stopped, so that what is counted below stays put.
    for (const id of triggerIds) await app.services.triggers.update({ id: owner.id }, id, { status: 'paused' });
    const final = await until('the runs under way to end', async () => {
      const all = await app.db.triggerRun.findMany({ where: { triggerId: { in: triggerIds } }, orderBy: { scheduledFor: 'asc' } });
      return all.every((r) => r.status !== 'running') ? all : null;
    });
    expect(final.length).toBeGreaterThanOrEqual(runs.length);
    for (const id of triggerIds) {
      const times = final.filter((r) => r.triggerId === id).map((r) => r.scheduledFor!.getTime());
      // Consecutive occurrences from the first: none missed, none twice.
      expect(times, id).toEqual(times.map((_, i) => times[0]! + i * EVERY_S * 1000));
    }
    // One prompt per run, and no prompt without a run.
    const prompts = await app.db.message.findMany({
      where: { role: 'user', session: { ownerId: owner.id }, content: { startsWith: 'Occurrence check' } },
      select: { sessionId: true },
    });
    const withSession = final.filter((r) => r.sessionId);
    expect(prompts.length).toBe(withSession.length);
    expect(new Set(prompts.map((p) => p.sessionId))).toEqual(new Set(withSession.map((r) => r.sessionId)));
    // Runs cut off by the kill failed with their reason; every one due after it completed.
    const failed = final.filter((r) => r.status === 'failed');
    expect(failed.length).toBeGreaterThan(0);
    for (const run of failed) expect(run.error).toEqual(expect.any(String));
    const afterKill = final.filter((r) => r.scheduledFor!.getTime() >= horizon);
    expect(afterKill.length).toBeGreaterThanOrEqual(TRIGGER_COUNT);
    expect(afterKill.filter((r) => r.status !== 'completed')).toEqual([]);
    // Both instances wrote replies: the killed one before the kill, the other at least after it;
    // the app, which only watches, none.
    const all = await writers();
    expect(all.size).toBe(2);
    expect(all).toContain(killed.instance);
    expect(all).not.toContain(app.services.replies.instanceId);
  });
});
