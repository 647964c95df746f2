import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withServices } from '../../src/cli/services.ts';
import { loadConfig } from '../../src/config.ts';
import { operations } from '../../src/control/operations.ts';
import { openDatabase } from '../../src/db/database.ts';
import { appliedMigrations, applyMigrations, type Migration, readMigrations } from '../../src/db/migrate.ts';
import { withPGlite } from '../../src/db/pglite-thread.ts';
import type { Sql } from '../../src/db/sql.ts';
import { checksum, column, describeTables, type Table } from '../../src/db/tables.ts';
import { loadToolRegistry } from '../../src/domain/tools/registry.ts';
import { runCli, type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { root } from '../helpers/service-command.ts';

/**
 * Data directories made by earlier releases, started by this one. An earlier release's schema is
 * its migrations, taken from git at its commit and applied by the same code as any start.
 */
const RELEASES = {
  /** The last commit before the current schema's newest migration (pending_signals). */
  previous: 'b9569d80e549987806479afd2c0fa6b57868897a',
  /** Before usernames were unique after case folding (normalized_usernames). */
  beforeUniqueUsernames: 'd14f7bec620c7b0e4b0339253eaa05fc8c893f3d',
};

async function migrationsAt(commit: string, scratch: string): Promise<Migration[]> {
  const dir = join(scratch, commit);
  execFileSync('mkdir', ['-p', dir]);
  execFileSync('sh', ['-c', `git -C "${root}" archive ${commit} prisma/migrations | tar -x -C "${dir}"`]);
  return readMigrations(join(dir, 'prisma', 'migrations'));
}

/** Each table's rows and checksum, over the columns it has now (later migrations may add some). */
async function contents(sql: Sql, tables?: Table[]) {
  const out: Record<string, { rows: number; checksum: string }> = {};
  for (const t of tables ?? (await describeTables(sql))) out[t.name] = await checksum(sql, t);
  return out;
}

/** Today's tables of `sql`, limited to the columns they had in `earlier` (later migrations may add some). */
async function asEarlier(sql: Sql, earlier: Table[]): Promise<Table[]> {
  const now = new Map((await describeTables(sql)).map((t) => [t.name, t]));
  return earlier.map((t) => ({ ...now.get(t.name)!, columns: t.columns.map((c) => column(now.get(t.name)!, c.name)) }));
}

async function serve(dataDir: string): Promise<ServerProcess> {
  const server = await startServerProcess({ DATA_DIR: dataDir });
  // Listening, or gone: a start that fails exits with its reason.
  await Promise.race([server.waitFor(/parley listening on/).catch(() => {}), server.exited]);
  return server;
}

async function stop(server: ServerProcess) {
  server.child.kill('SIGTERM');
  expect(await server.exited).toBe(0);
}

describe('a data directory made by the previous release', () => {
  let scratch: string;
  let dataDir: string;
  let earlier: Migration[];
  let tables: Table[];
  let before: Record<string, { rows: number; checksum: string }>;
  let apiKey: string;

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'parley-upgrade-'));
    dataDir = join(scratch, 'data');
    earlier = await migrationsAt(RELEASES.previous, scratch);
    const current = await readMigrations();
    // Older, and a beginning of this release's history: what an upgrade meets.
    expect(earlier.length).toBeLessThan(current.length);
    expect(earlier.map((m) => [m.name, m.checksum])).toEqual(current.slice(0, earlier.length).map((m) => [m.name, m.checksum]));
  });
  afterAll(() => rm(scratch, { recursive: true, force: true }));

  describe('made and filled without the build’s snapshot', () => {
    // A hook of its own (each has its time): a cluster made without the build's snapshot (initdb), and filled.
    beforeAll(async () => {
      const database = await openDatabase({ kind: 'pglite', dataDir }, { snapshot: false });
      try {
        expect(await applyMigrations(database.migrationAdapterFactory, { migrations: earlier })).toHaveLength(earlier.length);
        const config = loadConfig({ DATA_DIR: dataDir });
        const manifest = await withServices(config, database, await loadToolRegistry(config.toolsDir), async (services) => {
          const demo = await operations.demo.run({ services, database, progress: () => {} }, {});
          await operations['manna.grant'].run(
            { services, database, progress: () => {} },
            { username: 'alice', amount: '7.25', kind: 'forever' },
          );
          return demo;
        });
        apiKey = manifest.users.find((u) => u.username === 'alice')!.apiKey;
        tables = await describeTables(database.migrationAdapterFactory);
        before = await contents(database.migrationAdapterFactory, tables);
        expect(before.Creation!.rows).toBeGreaterThan(100);
        expect(before.MannaLedger!.rows).toBeGreaterThan(0);
      } finally {
        await database.close();
      }
    });

    it('backs up (this release’s backup of a database it has not migrated yet)', async () => {
      const backup = await runCli(['backup', join(scratch, 'earlier.backup')], { DATA_DIR: dataDir });
      expect(backup.code, backup.stderr).toBe(0);
      expect(backup.stdout).toContain(`migrations up to ${earlier.at(-1)!.name}`);
    });

    it('that backup restores into this release, migrated forward', async () => {
      const file = join(scratch, 'earlier.backup');
      const restoredDir = join(scratch, 'restored');
      const restored = await runCli(['restore', file], { DATA_DIR: restoredDir });
      expect(restored.code, restored.stderr).toBe(0);
      const later = (await readMigrations()).slice(earlier.length).map((m) => m.name);
      expect(restored.stdout).toContain(`Then migrated: ${later.join(', ')}.`);
    });

    it('the restored directory holds every row, column for column', async () => {
      await withPGlite(join(scratch, 'restored', 'pgdata'), async (sql) => {
        expect(await contents(sql, await asEarlier(sql, tables))).toEqual(before);
      });
    });

    it('starts on this release, which migrates it and serves what it held', async () => {
      const server = await serve(dataDir);
      try {
        expect(server.output()).toMatch(/parley listening on/);
        const me = await fetch(`${server.url}/v2/creators/me`, { headers: { 'x-api-key': apiKey } });
        expect(me.status).toBe(200);
        expect(await me.json()).toMatchObject({ creator: { username: 'alice' }, foreverBalance: 257.25 });
        const search = await fetch(`${server.url}/v2/creations/search?query=lighthouse%20in%20a%20thunderstorm`, {
          headers: { 'x-api-key': apiKey },
        });
        expect(((await search.json()) as { docs: unknown[] }).docs.length).toBeGreaterThan(0);
      } finally {
        await stop(server);
      }
    });

    it('keeps every row: each table holds what it held, column for column', async () => {
      await withPGlite(join(dataDir, 'pgdata'), async (sql) => {
        expect((await appliedMigrations(sql)).map((m) => m.name)).toEqual((await readMigrations()).map((m) => m.name));
        expect(await contents(sql, await asEarlier(sql, tables))).toEqual(before);
      });
    });
  });
});

describe('a migration that fails on an earlier release’s data', () => {
  let scratch: string;
  let dataDir: string;
  let before: Record<string, { rows: number; checksum: string }>;
  let earlier: Migration[];

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'parley-upgrade-fails-'));
    dataDir = join(scratch, 'data');
    earlier = await migrationsAt(RELEASES.beforeUniqueUsernames, scratch);
    await mkdir(join(dataDir, 'pgdata'), { recursive: true });
    await withPGlite(join(dataDir, 'pgdata'), async (sql) => {
      await applyMigrations(sql, { migrations: earlier });
      // Two names that were distinct then and are the same name now.
      await sql.exec(`INSERT INTO "User" (id, username, "updatedAt", "foreverBalance") VALUES ('u-1', 'Max', now(), 3), ('u-2', 'MAX', now(), 0);
        INSERT INTO "MannaLedger" (id, "userId", kind, amount, "balanceAfter", reason) VALUES ('l-1', 'u-1', 'forever', 3, 3, 'grant')`);
      before = await contents(sql);
    });
  });
  afterAll(() => rm(scratch, { recursive: true, force: true }));

  it('stops the start, saying which migration failed and why, and leaves the database as it was', async () => {
    const server = await serve(dataDir);
    expect(await server.exited).toBe(1);
    expect(server.output()).toMatch(
      /Migration 20261125000000_normalized_usernames failed: Usernames must be unique regardless of case and Unicode form, and these clash: MAX \(user u-2\), Max \(user u-1\)\nHint: Rename all but one/,
    );
    expect(server.output()).toMatch(/Nothing was changed: the database is as it was \(migrated up to 20261124000000_search\)/);
    await withPGlite(join(dataDir, 'pgdata'), async (sql) => {
      expect((await appliedMigrations(sql)).map((m) => m.name)).toEqual(earlier.map((m) => m.name));
      // The same tables (none of those later migrations make), with the same rows.
      expect(await contents(sql)).toEqual(before);
    });
  });

  it('once the clash is resolved, starts and migrates, keeping the rows', async () => {
    await withPGlite(join(dataDir, 'pgdata'), (sql) => sql.exec(`UPDATE "User" SET username = 'Max Two' WHERE id = 'u-2'`));
    await stop(await serve(dataDir));
    await withPGlite(join(dataDir, 'pgdata'), async (sql) => {
      expect((await appliedMigrations(sql)).map((m) => m.name)).toEqual((await readMigrations()).map((m) => m.name));
      const [[users, ledger]] = (await sql.rows(
        `SELECT string_agg(username, ',' ORDER BY id), (SELECT string_agg(id, ',') FROM "MannaLedger") FROM "User"`,
      )) as [[string, string]];
      expect([users, ledger]).toEqual(['Max,Max Two', 'l-1']);
    });
  });
});
