import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appliedMigrations, applyMigrations, type Migration, readMigrations } from '../../src/db/migrate.ts';
import { withPGlite } from '../../src/db/pglite-thread.ts';
import type { Sql } from '../../src/db/sql.ts';
import { checksum, column, describeTables, type Table } from '../../src/db/tables.ts';
import { runCli, type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { root } from '../helpers/service-command.ts';

/**
 * Data directories made by earlier releases, started by this one: one the previous release made
 * itself (a saved fixture), and one whose schema is an earlier release's migrations, taken from
 * git at its commit, holding data a later migration refuses.
 */
const RELEASES = {
  /** The last commit before pending_signals and jobs_autonomy: the fixture's release. */
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

/**
 * Columns a later migration renamed, by table: their values are kept under the new name
 * (20261201100000_triggers; its conversion of the rows is test/db/triggers-migration.test.ts).
 */
const RENAMED: Record<string, Record<string, string>> = {
  Trigger: { triggerPrompt: 'prompt', lastRun: 'lastRunTime' },
  // 20261202000000_tasks: the ledger's link to a tool call is named after the task it now is.
  MannaLedger: { toolCallId: 'taskId' },
};

/** Tables a later migration renamed (20261202000000_tasks: the tool calls are the tasks). */
const RENAMED_TABLES: Record<string, string> = { ToolCall: 'Task' };

/**
 * Tables whose rows a later migration converts on purpose: compared by their count of rows only
 * (20261201100000_triggers gives each cron a seconds field and the rows the new fields; what it
 * makes of them is test/db/triggers-migration.test.ts. 20261203000000_deployments_telegram
 * drops the secrets deployments held in clear and says why in their lastError.)
 */
const CONVERTED = new Set(['Trigger', 'Deployment']);
const comparable = (c: Record<string, { rows: number; checksum: string }>) =>
  Object.fromEntries(
    Object.entries(c).map(([name, v]) => [RENAMED_TABLES[name] ?? name, CONVERTED.has(name) ? { rows: v.rows, checksum: 'converted' } : v]),
  );

/** Today's tables of `sql`, limited to the columns they had in `earlier` (later migrations may add some, or rename them). */
async function asEarlier(sql: Sql, earlier: Table[]): Promise<Table[]> {
  const now = new Map((await describeTables(sql)).map((t) => [t.name, t]));
  return earlier.map((t) => {
    const today = now.get(RENAMED_TABLES[t.name] ?? t.name)!;
    return { ...today, columns: t.columns.map((c) => column(today, RENAMED[t.name]?.[c.name] ?? c.name)) };
  });
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

/**
 * A data directory as the previous release left it: made by that release's own build and CLI
 * (`git worktree add <dir> ${RELEASES.previous}`, `npm run build`, then with DATA_DIR set,
 * `parley demo` and `parley manna grant alice 7.25`; PGlite and Prisma at the versions this one
 * has), its migrations applied by Prisma's schema engine as that release did, and saved as
 * test/db/fixtures/data-dir-b9569d8.tar.xz (1.1 MB). alice's key is the one `demo` printed.
 */
const FIXTURE = join(root, 'test', 'db', 'fixtures', 'data-dir-b9569d8.tar.xz');
const FIXTURE_ALICE_KEY = 'pk_GlaZaeYgtKsYVOYU_vRK0gas_-pidqdWT_StsTgh1ydo5taGNSygR_MUj1U0';

describe('a data directory made by the previous release', () => {
  let scratch: string;
  let dataDir: string;
  let earlier: Migration[];
  let tables: Table[];
  let before: Record<string, { rows: number; checksum: string }>;

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'parley-upgrade-'));
    dataDir = join(scratch, 'data');
    await mkdir(dataDir, { mode: 0o700 });
    execFileSync('tar', ['-xJf', FIXTURE, '-C', dataDir]);
    await withPGlite(join(dataDir, 'pgdata'), async (sql) => {
      earlier = (await appliedMigrations(sql)) as Migration[];
      tables = await describeTables(sql);
      before = await contents(sql, tables);
    });
    const current = await readMigrations();
    // Older, and a beginning of this release's history: what an upgrade meets.
    expect(earlier.length).toBeLessThan(current.length);
    expect(earlier.map((m) => [m.name, m.checksum])).toEqual(current.slice(0, earlier.length).map((m) => [m.name, m.checksum]));
    expect(before.Creation!.rows).toBeGreaterThan(100);
    expect(before.MannaLedger!.rows).toBeGreaterThan(0);
  });
  afterAll(() => rm(scratch, { recursive: true, force: true }));

  it('backs up (this release’s backup of a database it has not migrated yet)', async () => {
    const backup = await runCli(['backup', join(scratch, 'earlier.backup')], { DATA_DIR: dataDir });
    expect(backup.code, backup.stderr).toBe(0);
    expect(backup.stdout).toContain(`migrations up to ${earlier.at(-1)!.name}`);
  });

  it('that backup restores into this release, migrated forward', async () => {
    const restored = await runCli(['restore', join(scratch, 'earlier.backup')], { DATA_DIR: join(scratch, 'restored') });
    expect(restored.code, restored.stderr).toBe(0);
    const later = (await readMigrations()).slice(earlier.length).map((m) => m.name);
    expect(restored.stdout).toContain(`Then migrated: ${later.join(', ')}.`);
  });

  it('the restored directory holds every row, column for column', async () => {
    await withPGlite(join(scratch, 'restored', 'pgdata'), async (sql) => {
      expect(comparable(await contents(sql, await asEarlier(sql, tables)))).toEqual(comparable(before));
    });
  });

  it('starts on this release, which migrates it and serves what it held', async () => {
    const server = await serve(dataDir);
    try {
      expect(server.output()).toMatch(/parley listening on/);
      const me = await fetch(`${server.url}/v2/creators/me`, { headers: { 'x-api-key': FIXTURE_ALICE_KEY } });
      expect(me.status).toBe(200);
      expect(await me.json()).toMatchObject({ creator: { username: 'alice' }, foreverBalance: 257.25 });
      const search = await fetch(`${server.url}/v2/creations/search?query=lighthouse%20in%20a%20thunderstorm`, {
        headers: { 'x-api-key': FIXTURE_ALICE_KEY },
      });
      expect(((await search.json()) as { docs: unknown[] }).docs.length).toBeGreaterThan(0);
    } finally {
      await stop(server);
    }
  });

  it('keeps every row: each table holds what it held, column for column', async () => {
    await withPGlite(join(dataDir, 'pgdata'), async (sql) => {
      expect((await appliedMigrations(sql)).map((m) => m.name)).toEqual((await readMigrations()).map((m) => m.name));
      expect(comparable(await contents(sql, await asEarlier(sql, tables)))).toEqual(comparable(before));
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

  it('once the clash is resolved, starts and migrates', async () => {
    await withPGlite(join(dataDir, 'pgdata'), (sql) => sql.exec(`UPDATE "User" SET username = 'Max Two' WHERE id = 'u-2'`));
    await stop(await serve(dataDir));
  });

  it('and keeps the rows', async () => {
    await withPGlite(join(dataDir, 'pgdata'), async (sql) => {
      expect((await appliedMigrations(sql)).map((m) => m.name)).toEqual((await readMigrations()).map((m) => m.name));
      const [[users, ledger]] = (await sql.rows(
        `SELECT string_agg(username, ',' ORDER BY id), (SELECT string_agg(id, ',') FROM "MannaLedger") FROM "User"`,
      )) as [[string, string]];
      expect([users, ledger]).toEqual(['Max,Max Two', 'l-1']);
    });
  });
});
