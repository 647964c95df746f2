import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyToPostgres } from '../../src/db/copy.ts';
import { applyMigrations, type Migration, readMigrations } from '../../src/db/migrate.ts';
import { startPGliteThread } from '../../src/db/pglite-thread.ts';
import { connectPostgres } from '../../src/db/sql.ts';
import { pgBossQueue } from '../../src/jobs/pg-boss.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';

/**
 * Tables that later issues add (tasks, collections, deployment state) must be copied by the same
 * command, unchanged: here a migration of the test's own adds such tables, with what makes
 * copying hard: a table referring to itself, two referring to each other, an identity column, a
 * composite key, keys whose order depends on collation, and awkward values. Pages of two rows,
 * so that every table takes several statements and a copy can stop between any two.
 */
const LATER_TABLES = `
CREATE TABLE "Todo" ("id" TEXT PRIMARY KEY, "userId" TEXT NOT NULL REFERENCES "User"("id") ON DELETE CASCADE,
  "parentId" TEXT REFERENCES "Todo"("id"), "title" TEXT NOT NULL, "due" TIMESTAMP(3), "done" BOOLEAN NOT NULL DEFAULT false,
  "tags" TEXT[] NOT NULL DEFAULT '{}', "meta" JSONB);
CREATE TABLE "Album" ("id" TEXT PRIMARY KEY, "userId" TEXT NOT NULL REFERENCES "User"("id"), "name" TEXT NOT NULL, "coverItemId" BIGINT);
CREATE TABLE "AlbumItem" ("id" BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  "collectionId" TEXT NOT NULL REFERENCES "Album"("id") ON DELETE CASCADE, "creationId" TEXT REFERENCES "Creation"("id"),
  "position" INTEGER NOT NULL, UNIQUE ("collectionId", "position"));
ALTER TABLE "Album" ADD CONSTRAINT "Album_coverItemId_fkey" FOREIGN KEY ("coverItemId") REFERENCES "AlbumItem"("id") ON DELETE SET NULL;
CREATE TABLE "DeploymentState" ("deploymentId" TEXT NOT NULL, "key" TEXT NOT NULL, "value" NUMERIC(20,4), PRIMARY KEY ("deploymentId", "key"));
`;

const FILL = `
INSERT INTO "User" (id, username, "updatedAt", "foreverBalance") VALUES ('u1', 'ada', now(), 5), ('U2', 'Bea', now(), 0);
INSERT INTO "MannaLedger" (id, "userId", kind, amount, "balanceAfter", reason) VALUES ('l1', 'u1', 'forever', 5, 5, 'grant');
INSERT INTO "Creation" (id, "userId", tool, name, url, "updatedAt", embedding, "embeddingProvider", "embeddingDimensions")
  VALUES ('c1', 'u1', 'flux_dev', 'Lighthouse', 'https://x/1.png', now(), ('[' || array_to_string(array_fill(0.036::real, ARRAY[768]), ',') || ']')::vector(768), 'p', 768);
-- Children sort before their parents, in C and in any other order.
INSERT INTO "Todo" (id, "userId", "title") VALUES ('z-root', 'u1', 'Root');
INSERT INTO "Todo" (id, "userId", "parentId", "title", "due", "done", "tags", "meta") VALUES
  ('a-child', 'u1', 'z-root', E'Quote '' backslash \\\\ tab\\t newline\\n', '2026-01-02 03:04:05.678', true, '{"a b","c,d",""}', '{"k": [1, null, "ü"]}'),
  ('B-child', 'U2', 'a-child', 'Ünïcödé 🌊', NULL, false, '{}', NULL),
  ('_under', 'U2', NULL, 'underscore', NULL, false, '{NULL}', 'null'),
  ('m-mid', 'u1', 'B-child', 'mid', NULL, false, '{}', '[]');
INSERT INTO "Album" (id, "userId", name) VALUES ('col-b', 'u1', 'Second'), ('col-a', 'U2', 'First');
INSERT INTO "AlbumItem" ("collectionId", "creationId", position) VALUES ('col-a', 'c1', 1), ('col-a', NULL, 2), ('col-b', 'c1', 1);
UPDATE "Album" SET "coverItemId" = (SELECT max(id) FROM "AlbumItem" WHERE "collectionId" = "Album".id);
INSERT INTO "DeploymentState" VALUES ('d1', 'b', 1.5), ('d1', 'a', NULL), ('D0', 'z', -2.25), ('d1', 'B', 0);
`;

const JOBS = { pollMs: 500, superviseS: 1, takeoverS: 10, poolSize: 2 };
const LATER_TURNS = { name: 'later-turns', oneAtATimePerKey: true, retries: 2, retryDelaySeconds: 5, runSeconds: 60 };

describe('db copy of tables it has never heard of', () => {
  let scratch: string;
  let migrations: Migration[];
  let source: ReturnType<typeof startPGliteThread>;
  const databases: { url: string; drop(): Promise<void> }[] = [];

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'parley-copy-tables-'));
    migrations = [...(await readMigrations()), { name: '29990101000000_later_tables', script: LATER_TABLES, checksum: 'test' }];
    source = startPGliteThread(join(scratch, 'pgdata'));
    await source.ready;
  });
  afterAll(async () => {
    await source?.close();
    for (const d of databases) await d.drop();
    await rm(scratch, { recursive: true, force: true });
  });

  const target = async () => {
    const db = await freshPostgresDatabase();
    databases.push(db);
    return db.url;
  };

  it('copies them in an order their keys allow, in pages, with the same rows and checksums on both sides', async () => {
    await applyMigrations(source.sql, { migrations });
    await source.sql.exec(FILL);
    // Work still owed, in the job queue's own tables: one job due later, one due now.
    const queue = pgBossQueue({ kind: 'embedded', executeSql: source.executeSql }, JOBS, console);
    await queue.declare(LATER_TURNS);
    expect(await queue.send(LATER_TURNS.name, { turn: 1 }, { key: 'session-1', at: new Date(Date.now() + 3_600_000) })).toBeTruthy();
    expect(await queue.send(LATER_TURNS.name, { turn: 7 }, { key: 'session-2' })).toBeTruthy();
    await queue.stop(0);
    const url = await target();
    const report = await copyToPostgres(source.sql, 'test-source', url, { migrations, withoutPgvector: true, pageRows: 2 });
    const later = report.tables.filter((t) => ['Todo', 'Album', 'AlbumItem', 'DeploymentState'].includes(t.name));
    expect(later.map((t) => [t.name, t.source.rows])).toEqual(
      expect.arrayContaining([
        ['Todo', 5],
        ['Album', 2],
        ['AlbumItem', 3],
        ['DeploymentState', 4],
      ]),
    );
    expect(report.tables.filter((t) => t.name.startsWith('pgboss.')).map((t) => [t.name, t.source.rows])).toEqual(
      expect.arrayContaining([
        ['pgboss.queue', 1],
        ['pgboss.job', 2],
      ]),
    );
    // Its bookkeeping is each database's own: not copied.
    expect(report.tables.map((t) => t.name)).not.toContain('pgboss.version');
    for (const t of report.tables) expect(t.target, t.name).toEqual(t.source);
    const names = report.tables.map((t) => t.name);
    expect(names.indexOf('User')).toBeLessThan(names.indexOf('Todo'));
    expect(names.indexOf('Creation')).toBeLessThan(names.indexOf('AlbumItem'));

    const db = await connectPostgres(url);
    try {
      expect(await db.rows(`SELECT id, "parentId" FROM "Todo" ORDER BY id COLLATE "C"`)).toEqual([
        ['B-child', 'a-child'],
        ['_under', null],
        ['a-child', 'z-root'],
        ['m-mid', 'B-child'],
        ['z-root', null],
      ]);
      expect(await db.rows(`SELECT title, tags::text, meta::text, due::text FROM "Todo" WHERE id = 'a-child'`)).toEqual([
        ["Quote ' backslash \\ tab\t newline\n", '{"a b","c,d",""}', '{"k": [1, null, "ü"]}', '2026-01-02 03:04:05.678'],
      ]);
      // The identity goes on after the copied rows, and the cycle's keys are filled in.
      expect(await db.rows(`INSERT INTO "AlbumItem" ("collectionId", position) VALUES ('col-b', 2) RETURNING id::text`)).toEqual([['4']]);
      expect(await db.rows(`SELECT id, "coverItemId"::text FROM "Album" ORDER BY id`)).toEqual([
        ['col-a', '2'],
        ['col-b', '3'],
      ]);
    } finally {
      await db.close();
    }
    // The queue on the target works the job that is due and keeps the one sent for later.
    const onTarget = pgBossQueue({ kind: 'postgres', url }, JOBS, console);
    try {
      let worked!: (data: unknown) => void;
      const done = new Promise((resolve) => {
        worked = resolve;
      });
      await onTarget.work(LATER_TURNS.name, { concurrency: 1 }, async (job) => worked(job.data));
      expect(await done).toEqual({ turn: 7 });
      expect(await onTarget.waiting(LATER_TURNS.name, 'session-1')).toBe(true);
    } finally {
      await onTarget.stop(0);
    }
  });

  it('stopped between two pages, goes on from there when run again, and ends with the same rows', async () => {
    const url = await target();
    let stopAt = 0;
    const stopped = copyToPostgres(source.sql, 'test-source', url, {
      migrations,
      withoutPgvector: true,
      pageRows: 2,
      onProgress: (done, total) => {
        stopAt ||= Math.floor(total / 2);
        if (done >= stopAt) throw new Error('stopped here');
      },
    });
    await expect(stopped).rejects.toThrow('stopped here');
    const db = await connectPostgres(url);
    try {
      const [[copied, marker]] = (await db.rows(`SELECT
        (SELECT sum(n) FROM (SELECT count(*) AS n FROM "User" UNION ALL SELECT count(*) FROM "Todo" UNION ALL SELECT count(*) FROM "AlbumItem" UNION ALL SELECT count(*) FROM "DeploymentState") AS c)::text,
        to_regclass('"_parley_copy"')::text`)) as [[string, string]];
      expect(Number(copied)).toBeGreaterThan(0);
      expect(Number(copied)).toBeLessThan(14);
      expect(marker).toBe('_parley_copy');

      const elsewhere = copyToPostgres(source.sql, 'another-source', url, { migrations, withoutPgvector: true });
      await expect(elsewhere).rejects.toThrow(/holds parley data .*from an unfinished copy of test-source/);

      const notices: string[] = [];
      const report = await copyToPostgres(source.sql, 'test-source', url, {
        migrations,
        withoutPgvector: true,
        pageRows: 2,
        onNotice: (l) => notices.push(l),
      });
      expect(report.resumed).toBe(true);
      expect(notices.join()).toMatch(/Resuming the unfinished copy of test-source/);
      for (const t of report.tables) expect(t.target, t.name).toEqual(t.source);
      expect(await db.rows(`SELECT to_regclass('"_parley_copy"')::text`)).toEqual([[null]]);
    } finally {
      await db.close();
    }
  });

  it('refuses a user who may create tables but not write to the ones a migration already made, changing nothing', async () => {
    const url = await target();
    const role = `parley_writer_${process.pid}`;
    const admin = await connectPostgres(url);
    try {
      await applyMigrations(admin, { migrations });
      await admin.exec(
        `CREATE ROLE ${role} LOGIN; GRANT CREATE, USAGE ON SCHEMA public TO ${role}; GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role}`,
      );
      const asWriter = new URL(url);
      asWriter.username = role;
      await expect(copyToPostgres(source.sql, 'test-source', asWriter.toString(), { migrations, withoutPgvector: true })).rejects.toThrow(
        new RegExp(`User ${role} lacks INSERT, UPDATE on table \\w+ of PostgreSQL at .*Nothing was changed`),
      );
      expect(await admin.rows(`SELECT count(*)::text FROM "User"`)).toEqual([['0']]);
      expect(await admin.rows(`SELECT to_regclass('"_parley_copy"')::text`)).toEqual([[null]]);
    } finally {
      await admin.exec(`DROP OWNED BY ${role}; DROP ROLE IF EXISTS ${role}`);
      await admin.close();
    }
  });
});
