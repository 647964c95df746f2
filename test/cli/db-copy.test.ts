import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrations } from '../../src/db/migrate.ts';
import { connectPostgres } from '../../src/db/sql.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { runCli, type ServerProcess, startCliProcess, startServerProcess } from '../helpers/process.ts';
import { freePort } from '../helpers/servers.ts';
import { expectConsistent, expectSameView, fill, MEDIA_BYTES, MEDIA_FILE, type View, view } from './moving-data.ts';

type Database = Awaited<ReturnType<typeof freshPostgresDatabase>>;

/** Rows of each named table on PostgreSQL at `url`. */
async function counts(url: string, tables: string[]) {
  const db = await connectPostgres(url);
  try {
    const out: Record<string, number> = {};
    for (const t of tables) out[t] = Number(((await db.rows(`SELECT count(*) FROM "${t}"`)) as [[string]])[0][0]);
    return out;
  } finally {
    await db.close();
  }
}

async function tablesIn(url: string) {
  const db = await connectPostgres(url);
  try {
    return ((await db.rows(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)) as [string][]).map(([t]) => t);
  } finally {
    await db.close();
  }
}

/**
 * `parley db copy --to <url>`: an embedded data directory, filled by a running service as users
 * fill it, into a real PostgreSQL (15, Debian's, without pgvector unless the server has it); then
 * a service started with DATABASE_URL must answer as the embedded one did.
 */
describe('parley db copy: from the embedded database to PostgreSQL', () => {
  let root: string;
  let dataDir: string;
  let server: ServerProcess;
  let filled: Awaited<ReturnType<typeof fill>>;
  let before: View;
  let target: Database;
  let pgvector: boolean;
  const databases: Database[] = [];
  const env = () => ({ DATA_DIR: dataDir });
  const copyArgs = (url: string, ...more: string[]) => ['db', 'copy', '--to', url, ...(pgvector ? [] : ['--without-pgvector']), ...more];

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'parley-copy-'));
    dataDir = join(root, 'data');
    server = await startServerProcess({ DATA_DIR: dataDir });
    await server.waitFor(/parley listening on/);
  });
  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await server?.exited;
    for (const d of databases) await d.drop();
    await rm(root, { recursive: true, force: true });
  });

  // Each hook has its time, and on a busy machine each of these takes a good part of it.
  describe('with a PostgreSQL database to copy to', () => {
    beforeAll(async () => {
      target = await freshPostgresDatabase();
      databases.push(target);
    });

    describe('from a service filled as users fill it', () => {
      beforeAll(async () => {
        filled = await fill(server, dataDir);
        const admin = await connectPostgres(target.url);
        const [[available]] = (await admin.rows(`SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')::text`)) as [
          [string],
        ];
        pgvector = available === 'true';
        await admin.close();
      });

      it('refuses while the service runs on the embedded database', async () => {
        const refused = await runCli(copyArgs(target.url), env());
        expect(refused.code).toBe(1);
        expect(refused.stderr).toMatch(/in use by a running parley \(pid \d+\)\. Stop it first/);
        before = await view(server.url, filled.alice);
        server.child.kill('SIGTERM');
        expect(await server.exited).toBe(0);
        expect(await tablesIn(target.url)).toEqual([]);
      });

      it('refuses a server it cannot reach, a user without rights, and a server without pgvector, changing nothing', async () => {
        const nowhere = `postgres://postgres@127.0.0.1:${await freePort()}/parley`;
        const unreachable = await runCli(copyArgs(nowhere), env());
        expect(unreachable.code).toBe(1);
        expect(unreachable.stderr).toMatch(/Cannot reach PostgreSQL at 127\.0\.0\.1:\d+\/parley: .*Nothing was changed/);

        const role = `parley_reader_${process.pid}`;
        const admin = await connectPostgres(target.url);
        try {
          await admin.exec(`CREATE ROLE ${role} LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC`);
          const asReader = new URL(target.url);
          asReader.username = role;
          const denied = await runCli(copyArgs(asReader.toString()), env());
          expect(denied.code).toBe(1);
          expect(denied.stderr).toMatch(
            new RegExp(`User ${role} may not create tables in schema public of database \\w+ .*GRANT CREATE ON SCHEMA public`),
          );
        } finally {
          await admin.exec(`DROP ROLE IF EXISTS ${role}`);
          await admin.close();
        }

        if (!pgvector) {
          const withoutVector = await runCli(['db', 'copy', '--to', target.url], env());
          expect(withoutVector.code).toBe(1);
          expect(withoutVector.stderr).toMatch(/has no pgvector\. Install it .*or run again with --without-pgvector .*Nothing was changed/);
        }
        expect(await tablesIn(target.url)).toEqual([]);
      });

      it('copies every table, with progress, and prints each one’s count and checksum on both sides', async () => {
        const copied = await runCli(copyArgs(target.url), env());
        expect(copied.code, copied.stderr).toBe(0);
        expect(copied.stderr).toMatch(/copy: \d+\/\d+ rows/);
        const [heading, ...lines] = copied.stdout.split('\n');
        expect(heading).toMatch(/^table\s+rows \(embedded\)\s+checksum \(embedded\)\s+rows \(PostgreSQL\)\s+checksum \(PostgreSQL\)$/);
        const rows = lines.filter((l) => /^\w+\s+\d+\s/.test(l)).map((l) => l.split(/\s+/));
        expect(rows.map((r) => r[0])).toEqual(
          expect.arrayContaining(['User', 'ApiKey', 'Session', 'Message', 'Reaction', 'Share', 'MannaLedger', 'Creation', 'Memory']),
        );
        for (const [name, rowsHere, sumHere, rowsThere, sumThere, verdict] of rows) {
          expect([rowsThere, sumThere, verdict], name).toEqual([rowsHere, sumHere, 'same']);
        }
        expect(Number(rows.find((r) => r[0] === 'Creation')![1])).toBeGreaterThan(200);
        expect(copied.stdout).toMatch(/Every table matches: \d+ rows copied/);
        expect(copied.stdout).toMatch(pgvector ? /pgvector vectors/ : /stored as real\[\].*parley migrate/);
        expect(await tablesIn(target.url)).not.toContain('_parley_copy');
      });

      it('a service on DATABASE_URL answers as the embedded one did: the same key, sessions, ledger, memories, search', async () => {
        const onPostgres = await startServerProcess({ DATABASE_URL: target.url, MEDIA_DIR: join(dataDir, 'media') });
        try {
          await onPostgres.waitFor(/parley listening on/);
          expectSameView(await view(onPostgres.url, filled.alice), before);
          const media = await fetch(`${onPostgres.url}/media/${MEDIA_FILE}`);
          expect(Buffer.from(await media.arrayBuffer())).toEqual(MEDIA_BYTES);
        } finally {
          onPostgres.child.kill('SIGTERM');
          await onPostgres.exited;
        }
        const db = await connectPostgres(target.url);
        await expectConsistent(db).finally(() => db.close());
      });

      it('refuses a target holding parley data unless --force, then replaces it', async () => {
        const refused = await runCli(copyArgs(target.url), env());
        expect(refused.code).toBe(1);
        expect(refused.stderr).toMatch(/holds parley data \(.*User.*\): refusing to overwrite it\. Run again with --force/);
        const forced = await runCli(copyArgs(target.url, '--force', '--json'), env());
        expect(forced.code, forced.stderr).toBe(0);
        const report = JSON.parse(forced.stdout) as { same: boolean; tables: { name: string; source: unknown; target: unknown }[] };
        expect(report.same).toBe(true);
        for (const t of report.tables) expect(t.target, t.name).toEqual(t.source);
      });

      it('killed with SIGKILL in the middle, a copy leaves a target that running it again completes', async () => {
        const second = await freshPostgresDatabase();
        databases.push(second);
        const db = await connectPostgres(second.url);
        const blocker = await connectPostgres(second.url);
        try {
          // Migrated beforehand, so that a lock can hold the copy up at one table: those before it are copied, the rest are not.
          await applyMigrations(db);
          await blocker.exec('BEGIN; LOCK TABLE "Message" IN SHARE MODE');
          const copy = startCliProcess(copyArgs(second.url), env());
          let waiting: string | null = null;
          while (!waiting) {
            [[waiting]] = (await db.rows(
              `SELECT min(l.pid)::text FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE NOT l.granted AND c.relname = 'Message'`,
            )) as [[string | null]];
            if (!waiting) await new Promise((r) => setTimeout(r, 20));
          }
          copy.child.kill('SIGKILL');
          await copy.exited;
          // The server ends the session of the client that is gone (as its keepalive would, later).
          await db.rows('SELECT pg_terminate_backend($1::int)', [waiting]);
          await blocker.exec('ROLLBACK');
          const partial = await counts(second.url, ['User', 'Session', 'Message', 'MannaLedger']);
          expect(partial.User).toBeGreaterThan(0);
          expect(partial.Session).toBeGreaterThan(0);
          expect(partial.Message).toBe(0);
          expect(partial.MannaLedger).toBe(0);
          expect(await tablesIn(second.url)).toContain('_parley_copy');

          const again = await runCli(copyArgs(second.url, '--json'), env());
          expect(again.code, again.stderr).toBe(0);
          expect(again.stderr).toMatch(/Resuming the unfinished copy of /);
          const report = JSON.parse(again.stdout) as {
            same: boolean;
            resumed: boolean;
            tables: { name: string; source: unknown; target: unknown }[];
          };
          expect(report).toMatchObject({ same: true, resumed: true });
          for (const t of report.tables) expect(t.target, t.name).toEqual(t.source);
          expect(await tablesIn(second.url)).not.toContain('_parley_copy');
        } finally {
          await blocker.close();
          await db.close();
        }
      });
    });
  });
});
