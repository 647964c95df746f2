import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DatabaseConfig } from '../../src/config.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { freshDatabase } from '../helpers/database.ts';
import { startTestApp } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';

// Triggers firing on their own, on the real app and its job queue (PGlite here, PostgreSQL on
// CI's second lane), with seconds-level schedules (TRIGGER_MIN_INTERVAL_S lowered to 1): each
// occurrence runs once, as the owner's prompt, and the rules on failures, pauses, keys, agents
// and outages hold. The test waits on what the database shows, never on a clock reading.

const TRIGGERS = { minIntervalS: 1, perUser: 100, runTimeoutS: 900, lateGraceS: 5 };
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
// Far enough apart that a run (a reply from the fake model, on a busy machine) ends before the next.
const everyTwoSeconds = { second: '*/2' };
const everyThreeSeconds = { second: '*/3' };

/** Polls until `check` holds (or gives up after `limitMs`), returning the last value read. */
async function until<T>(read: () => Promise<T>, check: (value: T) => boolean, limitMs = 30_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await read();
    if (check(value) || Date.now() > deadline) return value;
    await pause(100);
  }
}

const runsOf = (t: TestApp, triggerId: string) => t.db.triggerRun.findMany({ where: { triggerId }, orderBy: { startedAt: 'asc' } });

/** Occurrences `stepS` seconds apart from `first` to `last`, as ISO strings. */
const occurrencesFrom = (first: Date, last: Date, stepS: number) => {
  const out: string[] = [];
  for (let at = first.getTime(); at <= last.getTime(); at += stepS * 1000) out.push(new Date(at).toISOString());
  return out;
};

describe('triggers firing on one instance', () => {
  let t: TestApp;
  let llm: FakeOpenAI;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;

  setUp(async (start) => {
    llm = await start.fakeOpenAI({ tokens: ['On', ' it', '.'] });
    t = await start.app({ llm: { baseUrl: llm.baseUrl }, triggers: TRIGGERS });
    f = fixtures(t);
    alice = await t.createUser('alice');
  });

  const create = async (user: TestUser, agentId: string, body: Record<string, unknown>) => {
    const res = await t.rest('POST', `/v2/agents/${agentId}/triggers`, { key: user.apiKey, body });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.trigger as { id: string; next_scheduled_run: string };
  };

  it('runs every occurrence once, each a prompt of the owner in a session of its own, even after the key that made it is deleted', async () => {
    const agent = await f.agent(alice, { name: 'Clock' });
    const trigger = await create(alice, agent.id, { name: 'Tick', prompt: 'What time is it?', schedule: everyThreeSeconds });
    const first = new Date(trigger.next_scheduled_run);
    expect(first.getUTCSeconds() % 3).toBe(0);
    await until(
      () => runsOf(t, trigger.id),
      (runs) => runs.length >= 2,
    );
    // The key that made it goes: the trigger is the user's, not the key's.
    const key = await t.db.apiKey.findFirstOrThrow({ where: { userId: alice.id } });
    await t.services.apiKeys.delete({ id: alice.id, keyId: key.id }, alice.apiKey);
    const runs = await until(
      () => runsOf(t, trigger.id),
      (r) => r.length >= 4 && r.every((x) => x.status !== 'running'),
    );
    const scheduled = runs.map((r) => r.scheduledFor!.toISOString());
    // Every occurrence from the first, once each, none skipped while the instance was up.
    expect(scheduled).toEqual(occurrencesFrom(first, runs.at(-1)!.scheduledFor!, 3));
    for (const run of runs.filter((r) => r.status !== 'running')) {
      expect(run).toMatchObject({ status: 'completed', error: null });
      const messages = await t.db.message.findMany({ where: { sessionId: run.sessionId! }, orderBy: { ordinal: 'asc' } });
      expect(messages.filter((m) => m.role === 'user').map((m) => [m.senderId, m.content])).toEqual([[alice.id, 'What time is it?']]);
      expect(messages.find((m) => m.id === run.messageId)).toMatchObject({ role: 'assistant', status: 'complete', content: 'On it.' });
      expect((await t.db.session.findUniqueOrThrow({ where: { id: run.sessionId! } })).ownerId).toBe(alice.id);
    }
    expect(new Set(runs.map((r) => r.sessionId)).size).toBe(runs.length);
  });

  it('two failures in a row pause the trigger, with the reasons kept; resumed, it runs again', async () => {
    const bob = await t.createUser('bob');
    const agent = await f.agent(bob);
    llm.choose((request) => (request.body.messages.some((m) => m.content === 'Fail please') ? { status: 500 } : undefined));
    const trigger = await create(bob, agent.id, { prompt: 'Fail please', schedule: everyTwoSeconds });
    const paused = await until(
      () => t.db.trigger.findUniqueOrThrow({ where: { id: trigger.id } }),
      (x) => x.status === 'paused' && x.runningRunId === null,
    );
    expect(paused).toMatchObject({ status: 'paused', nextRun: null, errorCount: 2, lastError: expect.any(String) });
    const failed = await runsOf(t, trigger.id);
    expect(failed.map((r) => r.status)).toEqual(['failed', 'failed']);
    expect(failed.every((r) => r.error && r.error.length > 0)).toBe(true);
    // Paused: nothing more runs.
    await pause(4_500);
    expect(await runsOf(t, trigger.id)).toHaveLength(2);

    llm.choose(null);
    const resumed = await t.rest('PATCH', `/v2/agents/${agent.id}/triggers/${trigger.id}`, { key: bob.apiKey, body: { status: 'active' } });
    expect(resumed.body.trigger).toMatchObject({ status: 'active', error_count: 0 });
    const after = await until(
      () => runsOf(t, trigger.id),
      (r) => r.some((x) => x.status === 'completed'),
    );
    expect(after.find((x) => x.status === 'completed')).toBeDefined();
  });

  it('deleting the agent ends its triggers: nothing runs after', async () => {
    const carol = await t.createUser('carol');
    const agent = await f.agent(carol);
    const trigger = await create(carol, agent.id, { prompt: 'Still there?', schedule: everyTwoSeconds });
    await until(
      () => runsOf(t, trigger.id),
      (r) => r.length >= 1,
    );
    // Deleted as its owner deletes it, while its trigger's runs go on.
    const deleted = await t.rest('DELETE', `/v2/agents/${agent.id}`, { key: carol.apiKey });
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    expect(await t.db.trigger.findUnique({ where: { id: trigger.id } })).toBeNull();
    const sessionsBefore = await t.db.session.count({ where: { ownerId: carol.id } });
    await pause(4_500);
    expect(await t.db.session.count({ where: { ownerId: carol.id } })).toBe(sessionsBefore);
  });
});

describe('an outage', () => {
  // The instance runs the trigger, stops for several occurrences, and a new one starts on the
  // same database: done in the hook (starting apps is slow on a busy machine), checked in the test.
  // Longer than the grace for late jobs (TRIGGER_LATE_GRACE_S, 5 s here): occurrences before its last 5 s were missed, not late.
  const OUTAGE_MS = 10_000;
  const LATE_GRACE_MS = TRIGGERS.lateGraceS * 1000;
  let second: TestApp;
  let triggerId: string;
  let before: { runs: number; stoppedAt: Date };

  setUp(async (start) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-triggers-'));
    await start.service(Promise.resolve(dataDir), (dir) => rmSync(dir, { recursive: true, force: true }));
    const fresh = process.env.TEST_DATABASE_URL ? await start.service(freshDatabase(), (db) => db.drop()) : null;
    const shared: DatabaseConfig = fresh ? fresh.config : { kind: 'pglite', dataDir };
    const first = await startTestApp({ triggers: TRIGGERS }, shared);
    try {
      const dana = await first.createUser('dana');
      const agent = await fixtures(first).agent(dana);
      const made = await first.rest('POST', `/v2/agents/${agent.id}/triggers`, {
        key: dana.apiKey,
        body: { prompt: 'Ping', schedule: everyTwoSeconds },
      });
      triggerId = made.body.triggerId;
      await until(
        () => runsOf(first, triggerId),
        (r) => r.length >= 2 && r.every((x) => x.status !== 'running'),
      );
    } finally {
      await first.close();
    }
    before = { runs: 0, stoppedAt: new Date() };
    await pause(OUTAGE_MS);
    second = await start.app({ triggers: TRIGGERS }, shared);
    before.runs = (await runsOf(second, triggerId)).filter((r) => r.startedAt < before.stoppedAt).length;
  });

  it('runs a trigger once to catch up after the instance was stopped over several occurrences, then on schedule', async () => {
    const runs = await until(
      () => runsOf(second, triggerId),
      (r) => r.length >= before.runs + 3,
      20_000,
    );
    const afterOutage = runs.slice(before.runs).map((r) => r.scheduledFor!.getTime());
    // One run for the first occurrence missed, standing for all those missed...
    const [catchUp, ...next] = afterOutage;
    expect(catchUp!).toBeLessThanOrEqual(before.stoppedAt.getTime() + 2_000);
    expect(next[0]! - catchUp!, JSON.stringify(runs)).toBeGreaterThanOrEqual(OUTAGE_MS - LATE_GRACE_MS - 2_000);
    // ...then occurrences of the schedule again, each once. (A run every two seconds on a busy
    // machine may not keep up with its backlog; the test on one instance checks that none is skipped.)
    expect(next.every((at, i) => at % 2000 === 0 && (i === 0 || at > next[i - 1]!))).toBe(true);
  });
});
