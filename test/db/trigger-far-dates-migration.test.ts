import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { newDatabaseOn } from '../helpers/database.ts';

// Triggers made with dates past the year 9999, before such dates were refused, read back as
// invalid dates (GraphQL could not show them). The migration gives each the meaning the service
// now gives such a date: the last instant of 9999, and no next run past it. On PGlite, or on
// CI's PostgreSQL when TEST_DATABASE_URL names one.

const dir = fileURLToPath(new URL('../../prisma/migrations', import.meta.url));
const migrations = readdirSync(dir, { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort();
const MINE = '20261205100000_triggers_dates_past_9999';
const sql = (name: string) => readFileSync(`${dir}/${name}/migration.sql`, 'utf8');

/** Plain SQL on a new, empty database of the lane's kind. */
async function emptyDatabase() {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) {
    const db = new PGlite();
    return {
      exec: async (text: string) => void (await db.exec(text)),
      rows: async (text: string) => (await db.query<Record<string, unknown>>(text)).rows,
      close: () => db.close(),
    };
  }
  const made = await newDatabaseOn(server);
  const client = new pg.Client({ connectionString: made.url });
  await client.connect();
  return {
    exec: async (text: string) => void (await client.query(text)),
    rows: async (text: string) => (await client.query(text)).rows as Record<string, unknown>[],
    close: async () => {
      await client.end();
      await made.drop();
    },
  };
}

describe('the migration of triggers with dates past 9999', () => {
  let db: Awaited<ReturnType<typeof emptyDatabase>>;
  afterAll(() => db?.close());

  it('finishes those that can no longer run and brings their dates to the end of 9999; the others are untouched', async () => {
    db = await emptyDatabase();
    for (const name of migrations.filter((m) => m < MINE)) await db.exec(sql(name));
    await db.exec(`
      INSERT INTO "User" ("id", "username", "updatedAt") VALUES ('u1', 'owner', now()), ('a1', 'agent', now());
      INSERT INTO "Agent" ("id", "ownerId", "name", "updatedAt") VALUES ('a1', 'u1', 'Agent', now());
      INSERT INTO "Trigger" ("id", "name", "agentId", "userId", "cron", "prompt", "status", "startDate", "endDate", "nextRun", "queuedFor", "updatedAt") VALUES
        ('far-start', 'A', 'a1', 'u1', '0 * * * * *', 'p', 'active', '275760-09-13 00:00:00', NULL, '275760-09-13 00:00:00', NULL, now()),
        ('far-next', 'B', 'a1', 'u1', '0 0 0 1 1 *', 'p', 'active', '9999-06-01 00:00:00', NULL, '10000-01-01 00:00:00', '10000-01-01 00:00:00', now()),
        ('far-end', 'C', 'a1', 'u1', '0 0 9 * * *', 'p', 'active', NULL, '20000-01-01 00:00:00', '2030-01-01 09:00:00', NULL, now()),
        ('paused-far', 'D', 'a1', 'u1', '0 * * * * *', 'p', 'paused', '12000-01-01 00:00:00', NULL, NULL, NULL, now()),
        ('ordinary', 'E', 'a1', 'u1', '0 0 9 * * *', 'p', 'active', '2030-01-01 00:00:00', '2031-01-01 00:00:00', '2030-01-01 09:00:00', NULL, now());
    `);
    for (const name of migrations.filter((m) => m >= MINE)) await db.exec(sql(name));
    const rows = await db.rows(
      `SELECT "id", "status"::text AS "status", to_char("startDate", 'YYYY-MM-DD HH24:MI:SS.MS') AS "start",
              to_char("endDate", 'YYYY-MM-DD HH24:MI:SS.MS') AS "end", to_char("nextRun", 'YYYY-MM-DD HH24:MI:SS') AS "next",
              "queuedFor" IS NULL AS "unqueued"
       FROM "Trigger" ORDER BY "id"`,
    );
    const last = '9999-12-31 23:59:59.999';
    expect(rows).toEqual([
      { id: 'far-end', status: 'active', start: null, end: last, next: '2030-01-01 09:00:00', unqueued: true },
      { id: 'far-next', status: 'finished', start: '9999-06-01 00:00:00.000', end: null, next: null, unqueued: true },
      { id: 'far-start', status: 'finished', start: last, end: null, next: null, unqueued: true },
      {
        id: 'ordinary',
        status: 'active',
        start: '2030-01-01 00:00:00.000',
        end: '2031-01-01 00:00:00.000',
        next: '2030-01-01 09:00:00',
        unqueued: true,
      },
      { id: 'paused-far', status: 'paused', start: last, end: null, next: null, unqueued: true },
    ]);
  });
});
