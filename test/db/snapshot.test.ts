import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { startEarly } from '../../src/db/embedded.ts';
import { applyMigrations } from '../../src/db/migrate.ts';

/** The snapshot the build made (test/global-setup.ts builds before any test). */
const snapshot = fileURLToPath(new URL('../../dist/db/pgdata-snapshot', import.meta.url));

/** Everything the migrations define, as PostgreSQL's catalogs describe it. */
async function describeSchema(db: Database) {
  const q = (sql: string) => db.prisma.$queryRawUnsafe<Record<string, unknown>[]>(sql);
  return {
    columns: await q(`SELECT table_name, column_name, data_type, udt_name, is_nullable, column_default, ordinal_position::int
      FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`),
    constraints: await q(`SELECT conrelid::regclass::text AS table, conname, pg_get_constraintdef(oid) AS definition
      FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2`),
    indexes: await q(`SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1, 2`),
    enums: await q(
      `SELECT t.typname, e.enumlabel, e.enumsortorder::float8 FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid ORDER BY 1, 3`,
    ),
    extensions: await q(`SELECT extname, extversion FROM pg_extension ORDER BY 1`),
    functions: await q(`SELECT proname, pg_get_function_identity_arguments(oid) AS args, md5(prosrc) AS body
      FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1, 2`),
    triggers: await q(
      `SELECT tgrelid::regclass::text AS table, tgname, pg_get_triggerdef(oid) AS definition FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2`,
    ),
  };
}

/** `_prisma_migrations` less what differs between any two runs (row ids and times). */
const migrationRecords = (db: Database) =>
  db.prisma.$queryRawUnsafe<Record<string, unknown>[]>(`SELECT migration_name, checksum, logs, rolled_back_at, applied_steps_count,
    started_at IS NOT NULL AS started, finished_at >= started_at AS finished FROM _prisma_migrations ORDER BY migration_name`);

/**
 * A new embedded data directory starts as a copy of the build's snapshot instead of PGlite's
 * initdb followed by every migration; what it holds must be what the long way makes.
 */
describe('a data directory started from the migrated snapshot', () => {
  let scratch: string;
  let fromSnapshot: Database;
  let migrated: Database;
  let applied: { snapshot: string[]; plain: string[] };

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'parley-snapshot-'));
    fromSnapshot = await openDatabase({ kind: 'pglite', dataDir: join(scratch, 'snapshot') }, { snapshot });
    migrated = await openDatabase({ kind: 'pglite', dataDir: join(scratch, 'plain') }, { snapshot: false });
    applied = {
      snapshot: await applyMigrations(fromSnapshot.migrationAdapterFactory),
      plain: await applyMigrations(migrated.migrationAdapterFactory),
    };
  });
  afterAll(async () => {
    await fromSnapshot?.close();
    await migrated?.close();
    await rm(scratch, { recursive: true, force: true });
  });

  it('has every migration already, recorded as the migrations record it on a new database', async () => {
    expect(fromSnapshot.fromSnapshot).toBe(true);
    expect(migrated.fromSnapshot).toBe(false);
    expect(applied.snapshot).toEqual([]);
    expect(applied.plain.length).toBeGreaterThan(0);
    const records = await migrationRecords(fromSnapshot);
    expect(records).toEqual(await migrationRecords(migrated));
    expect(records.map((r) => r.migration_name)).toEqual(applied.plain);
  });

  it('has the same tables, columns, constraints, indexes, types, extensions, functions and triggers', async () => {
    const schema = await describeSchema(fromSnapshot);
    for (const part of ['columns', 'constraints', 'indexes', 'enums', 'extensions', 'functions'] as const)
      expect(schema[part].length, part).toBeGreaterThan(0);
    expect(schema).toEqual(await describeSchema(migrated));
  });

  it('is made aside: what an interrupted copy left is not taken for a cluster', async () => {
    const dataDir = join(scratch, 'interrupted');
    await mkdir(join(dataDir, 'pgdata.partial', 'base'), { recursive: true });
    await writeFile(join(dataDir, 'pgdata.partial', 'PG_VERSION'), '17\n');
    const db = await openDatabase({ kind: 'pglite', dataDir }, { snapshot });
    try {
      expect(db.fromSnapshot).toBe(true);
      expect(await applyMigrations(db.migrationAdapterFactory)).toEqual([]);
      expect((await readdir(dataDir)).sort()).toEqual(['parley.pid', 'pgdata']);
    } finally {
      await db.close();
    }
  });

  it('is empty and writable', async () => {
    expect(await fromSnapshot.prisma.user.count()).toBe(0);
    await fromSnapshot.prisma.user.create({ data: { username: 'first' } });
    expect(await fromSnapshot.prisma.user.count()).toBe(1);
  });
});

/**
 * `parley serve` starts the embedded database before it imports the service, so that PGlite
 * starts on its thread while the main thread loads the modules. On Node 22 and later that
 * import runs to its end without a turn of the event loop, so the thread must already be
 * running when it begins.
 */
describe('the embedded database started before the service loads', () => {
  let scratch: string;

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'parley-early-'));
  });
  afterAll(() => rm(scratch, { recursive: true, force: true }));

  it('makes the new data directory on its own thread while the main thread never yields', async () => {
    const dataDir = join(scratch, 'data');
    await startEarly(dataDir, snapshot);
    // The main thread busy, as while Node 22 imports the service: waiting here, not awaiting.
    // The bound only keeps a failure within the test's time; the thread needs a fraction of it.
    const pause = new Int32Array(new SharedArrayBuffer(4));
    const giveUp = Date.now() + 20_000;
    while (!existsSync(join(dataDir, 'pgdata')) && Date.now() < giveUp) Atomics.wait(pause, 0, 0, 10);
    const made = existsSync(join(dataDir, 'pgdata'));
    // The open takes the early start over, whatever the check found.
    const db = await openDatabase({ kind: 'pglite', dataDir }, { snapshot });
    try {
      expect(made, 'the database thread made pgdata/ while the main thread was busy').toBe(true);
      expect(await db.ping(10_000)).toBe(true);
      expect(db.fromSnapshot).toBe(true);
      expect((await readdir(dataDir)).sort()).toEqual(['parley.pid', 'pgdata']);
    } finally {
      await db.close();
    }
  });
});

describe('a database with a failed migration on record', () => {
  let db: Database;

  beforeAll(async () => {
    db = await openDatabase({ kind: 'pglite', dataDir: undefined });
    await applyMigrations(db.migrationAdapterFactory);
  });
  afterAll(() => db.close());

  it('is refused, as `prisma migrate deploy` refuses it, naming the migration', async () => {
    await db.prisma.$executeRawUnsafe(`INSERT INTO _prisma_migrations (id, checksum, migration_name, started_at, applied_steps_count)
      VALUES ('failed-one', 'x', '29991231000000_half_done', now(), 0)`);
    await expect(applyMigrations(db.migrationAdapterFactory)).rejects.toThrow(/failed migrations[\s\S]*29991231000000_half_done/);
  });
});
