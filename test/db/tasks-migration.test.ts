import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateUpTo, migrationScript, type RawDatabase, rawDatabase } from '../helpers/raw-database.ts';

const TASKS = '20261202000000_tasks';

/**
 * The tool calls table becomes the tasks table in place: a database with tool calls made before
 * it (charged, refused before their hold, paid by an agent's owner) keeps every row, id, ledger
 * link and session view, and each row learns whose task it is, its agent and its session.
 */
describe(`migration ${TASKS} over tool calls made before it`, () => {
  let db: RawDatabase;

  beforeAll(async () => {
    db = await rawDatabase();
    await migrateUpTo(db, TASKS);
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
    await db.exec(await migrationScript(TASKS));
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
