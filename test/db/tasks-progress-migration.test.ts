import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateUpTo, migrationScript, type RawDatabase, rawDatabase } from '../helpers/raw-database.ts';

const MIGRATION = '20261207000000_completed_tasks_progress';

/** Reply tool calls completed before the fix kept progress 0; the migration makes them done, and leaves the rest. */
describe(`migration ${MIGRATION}`, () => {
  let db: RawDatabase;

  beforeAll(async () => {
    db = await rawDatabase();
    await migrateUpTo(db, MIGRATION);
    await db.exec(`
      INSERT INTO "User" (id, username, "foreverBalance", "updatedAt") VALUES ('alice', 'alice', 10, now());
      INSERT INTO "Task" (id, "userId", tool, status, progress, "updatedAt") VALUES
        ('reply-call', 'alice', 'flux_dev', 'completed', 0, now()),
        ('own', 'alice', 'flux_dev', 'completed', 1, now()),
        ('halfway', 'alice', 'flux_dev', 'running', 0.5, now()),
        ('failed', 'alice', 'flux_dev', 'failed', 0.25, now());
    `);
    await db.exec(await migrationScript(MIGRATION));
  });
  afterAll(() => db?.close());

  it('sets progress 1 on every completed task, and changes no other', async () => {
    expect(await db.rows(`SELECT id, status::text, progress FROM "Task" ORDER BY id`)).toEqual([
      { id: 'failed', status: 'failed', progress: 0.25 },
      { id: 'halfway', status: 'running', progress: 0.5 },
      { id: 'own', status: 'completed', progress: 1 },
      { id: 'reply-call', status: 'completed', progress: 1 },
    ]);
  });
});
