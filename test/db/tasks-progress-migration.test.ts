import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newDatabaseOn } from '../helpers/database.ts';

const migrationsDir = fileURLToPath(new URL('../../prisma/migrations', import.meta.url));
const MIGRATION = '20261207000000_completed_tasks_progress';

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

/** Reply tool calls completed before the fix kept progress 0; the migration makes them done, and leaves the rest. */
describe(`migration ${MIGRATION}`, () => {
  let db: Awaited<ReturnType<typeof rawDatabase>>;

  beforeAll(async () => {
    db = await rawDatabase();
    const names = (await readdir(migrationsDir)).filter((n) => /^\d/.test(n)).sort();
    const script = (name: string) => readFile(`${migrationsDir}/${name}/migration.sql`, 'utf8');
    for (const name of names.filter((n) => n < MIGRATION)) await db.exec(await script(name));
    await db.exec(`
      INSERT INTO "User" (id, username, "foreverBalance", "updatedAt") VALUES ('alice', 'alice', 10, now());
      INSERT INTO "Task" (id, "userId", tool, status, progress, "updatedAt") VALUES
        ('reply-call', 'alice', 'flux_dev', 'completed', 0, now()),
        ('own', 'alice', 'flux_dev', 'completed', 1, now()),
        ('halfway', 'alice', 'flux_dev', 'running', 0.5, now()),
        ('failed', 'alice', 'flux_dev', 'failed', 0.25, now());
    `);
    await db.exec(await script(MIGRATION));
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
