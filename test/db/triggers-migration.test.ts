import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, describe, expect, it } from 'vitest';

// The triggers migration keeps the triggers made before it: applied over a database that holds
// one of the old shape, the row is still there, with its prompt, its cron given a seconds field,
// its session as an `existing` target, and nothing running.

const dir = fileURLToPath(new URL('../../prisma/migrations', import.meta.url));
const migrations = readdirSync(dir, { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort();
const MINE = '20261201100000_triggers';
const sql = (name: string) => readFileSync(`${dir}/${name}/migration.sql`, 'utf8');

describe('the triggers migration', () => {
  const db = new PGlite();
  afterAll(() => db.close());

  it('keeps existing triggers, in the new shape', async () => {
    // On the real clock, as the rows' now() stamps are: it ran yesterday, and was due to run tomorrow.
    const lastRun = new Date(Date.now() - 86_400_000);
    const nextRun = new Date(Date.now() + 86_400_000);
    for (const name of migrations.filter((m) => m < MINE)) await db.exec(sql(name));
    await db.exec(`
      INSERT INTO "User" ("id", "username", "updatedAt") VALUES ('u1', 'olduser', now()), ('a1', 'oldagent', now());
      INSERT INTO "Agent" ("id", "ownerId", "name", "updatedAt") VALUES ('a1', 'u1', 'Old agent', now());
      INSERT INTO "Session" ("id", "ownerId", "updatedAt") VALUES ('s1', 'u1', now());
      INSERT INTO "Trigger" ("id", "name", "agentId", "userId", "sessionId", "cron", "timezone", "triggerPrompt", "status", "lastRun", "nextRun", "updatedAt")
      VALUES ('t1', 'Mornings', 'a1', 'u1', 's1', '0 9 * * 1-5', 'Europe/Paris', 'Say good morning', 'running', '${lastRun.toISOString()}', '${nextRun.toISOString()}', now()),
             ('t2', 'Weekly', 'a1', 'u1', NULL, '30 0 17 * * 5', 'UTC', 'Sum up', 'paused', NULL, NULL, now());
    `);
    for (const name of migrations.filter((m) => m >= MINE)) await db.exec(sql(name));
    const { rows } = await db.query<Record<string, unknown>>(
      `SELECT "id", "name", "prompt", "cron", "timezone", "sessionId", "sessionTarget", "status", "lastRunTime", "nextRun", "errorCount", "runningRunId"
       FROM "Trigger" ORDER BY "id"`,
    );
    expect(rows).toEqual([
      {
        id: 't1',
        name: 'Mornings',
        prompt: 'Say good morning',
        cron: '0 0 9 * * 1-5',
        timezone: 'Europe/Paris',
        sessionId: 's1',
        sessionTarget: 'existing',
        status: 'active',
        lastRunTime: lastRun,
        nextRun: null,
        errorCount: 0,
        runningRunId: null,
      },
      {
        id: 't2',
        name: 'Weekly',
        prompt: 'Sum up',
        cron: '30 0 17 * * 5',
        timezone: 'UTC',
        sessionId: null,
        sessionTarget: 'new',
        status: 'paused',
        lastRunTime: null,
        nextRun: null,
        errorCount: 0,
        runningRunId: null,
      },
    ]);
  });
});
