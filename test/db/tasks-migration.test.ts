import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newDatabaseOn } from '../helpers/database.ts';

const migrationsDir = fileURLToPath(new URL('../../prisma/migrations', import.meta.url));
const TASKS = '20261202000000_tasks';

/** Plain SQL on the database the suite runs on: PGlite, or a new database on TEST_DATABASE_URL. */
async function rawDatabase() {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) {
    const lite = new PGlite();
    return {
      exec: (script: string) => lite.exec(script).then(() => {}),
      rows: async <T>(sql: string) => (await lite.query<T>(sql)).rows,
      close: () => lite.close(),
    };
  }
  const { url, drop } = await newDatabaseOn(server);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return {
    exec: (script: string) => client.query(script).then(() => {}),
    rows: async <T>(sql: string) => (await client.query(sql)).rows as T[],
    close: async () => {
      await client.end();
      await drop();
    },
  };
}

/**
 * The tool calls table becomes the tasks table in place: a database with tool calls made before
 * it (charged, refused before their hold, paid by an agent's owner) keeps every row, id, ledger
 * link and session view, and each row learns whose task it is, its agent and its session.
 */
describe(`migration ${TASKS} over tool calls made before it`, () => {
  let db: Awaited<ReturnType<typeof rawDatabase>>;

  beforeAll(async () => {
    db = await rawDatabase();
    const names = (await readdir(migrationsDir)).filter((n) => /^\d/.test(n)).sort();
    const script = (name: string) => readFile(`${migrationsDir}/${name}/migration.sql`, 'utf8');
    for (const name of names.filter((n) => n < TASKS)) await db.exec(await script(name));
    await db.exec(`
      INSERT INTO "User" (id, username, "foreverBalance", "updatedAt") VALUES
        ('alice', 'alice', 10, now()), ('bob', 'bob', 10, now()), ('ann', 'ann', 10, now()), ('ava', 'ava', 0, now());
      UPDATE "User" SET type = 'agent' WHERE id IN ('ann', 'ava');
      INSERT INTO "Agent" (id, "ownerId", name, "ownerPays", "updatedAt") VALUES
        ('ann', 'alice', 'Ann', 'off', now()), ('ava', 'bob', 'Ava', 'full', now());
      INSERT INTO "Session" (id, "ownerId", "updatedAt") VALUES ('s1', 'alice', now());
      INSERT INTO "Message" (id, "sessionId", role, "senderId", status, "updatedAt") VALUES
        ('m1', 's1', 'assistant', 'ann', 'complete', now()), ('m2', 's1', 'assistant', 'ava', 'complete', now());
      INSERT INTO "ToolCall" (id, "messageId", position, "callId", tool, status, cost, result, "updatedAt") VALUES
        ('paid', 'm1', 0, 'call_a', 'flux_dev', 'completed', 1, '{"ok":true}', now()),
        ('refused', 'm1', 1, 'call_b', 'flux_dev', 'failed', NULL, NULL, now()),
        ('owners', 'm2', 0, 'call_c', 'flux_dev', 'failed', NULL, NULL, now());
      INSERT INTO "MannaLedger" (id, "userId", kind, amount, "balanceAfter", reason, "sessionId", "messageId", "toolCallId") VALUES
        ('l1', 'alice', 'forever', -1, 9, 'tool: flux_dev', 's1', 'm1', 'paid');
    `);
    await db.exec(await script(TASKS));
  });
  afterAll(() => db?.close());

  it('keeps every call as a task with its id, place and outcome, and names whose it is', async () => {
    const tasks = await db.rows<Record<string, unknown>>(
      `SELECT id, "userId", "agentId", "sessionId", "messageId", position, "callId", status::text, progress, public, instance FROM "Task" ORDER BY id`,
    );
    expect(tasks).toEqual([
      // The agent's owner pays for what Ava does.
      {
        id: 'owners',
        userId: 'bob',
        agentId: 'ava',
        sessionId: 's1',
        messageId: 'm2',
        position: 0,
        callId: 'call_c',
        status: 'failed',
        progress: 0,
        public: false,
        instance: null,
      },
      // Charged: its ledger row names the payer.
      {
        id: 'paid',
        userId: 'alice',
        agentId: 'ann',
        sessionId: 's1',
        messageId: 'm1',
        position: 0,
        callId: 'call_a',
        status: 'completed',
        progress: 1,
        public: false,
        instance: null,
      },
      // Refused before its hold: the session's owner would have paid.
      {
        id: 'refused',
        userId: 'alice',
        agentId: 'ann',
        sessionId: 's1',
        messageId: 'm1',
        position: 1,
        callId: 'call_b',
        status: 'failed',
        progress: 0,
        public: false,
        instance: null,
      },
    ]);
  });

  it('keeps the ledger row linked to its task, and the table of tool calls is gone', async () => {
    expect(await db.rows(`SELECT id, "taskId" FROM "MannaLedger"`)).toEqual([{ id: 'l1', taskId: 'paid' }]);
    expect(await db.rows(`SELECT to_regclass('"ToolCall"')::text AS t`)).toEqual([{ t: null }]);
  });

  it('takes tasks made by themselves (no message), and keeps a task whose user is gone from lingering', async () => {
    await db.exec(`INSERT INTO "Task" (id, "userId", tool, "updatedAt") VALUES ('own', 'bob', 'flux_dev', now())`);
    expect(await db.rows(`SELECT status::text, "messageId", progress FROM "Task" WHERE id = 'own'`)).toEqual([
      { status: 'pending', messageId: null, progress: 0 },
    ]);
    await expect(db.exec(`UPDATE "Task" SET progress = 1.5 WHERE id = 'own'`)).rejects.toThrow();
    await db.exec(`DELETE FROM "User" WHERE id = 'bob'`);
    expect(await db.rows(`SELECT id FROM "Task" WHERE id IN ('own', 'owners') ORDER BY id`)).toEqual([]);
  });
});
