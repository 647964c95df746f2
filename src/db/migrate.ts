import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import type { SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import { noFilters, openSchemaEngine } from './schema-engine.ts';

const migrationsDir = fileURLToPath(new URL('../../prisma/migrations', import.meta.url));

interface Migration {
  name: string;
  script: string;
}

async function readMigrations(): Promise<Migration[]> {
  const names = (await readdir(migrationsDir, { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  return Promise.all(names.map(async (name) => ({ name, script: await readFile(join(migrationsDir, name, 'migration.sql'), 'utf8') })));
}

/**
 * Whether `_prisma_migrations` records exactly the migration folders as applied, each with the
 * checksum the schema engine gives its script (SHA-256 of the text), and no failed attempt.
 * Then the schema engine would do nothing, and loading it (a large WebAssembly module) is the
 * slowest part of starting on an up-to-date database. Anything else, including a table that
 * does not exist yet, is left to the engine.
 */
async function allApplied(adapterFactory: SqlMigrationAwareDriverAdapterFactory, migrations: Migration[]): Promise<boolean> {
  const adapter = await adapterFactory.connect();
  try {
    const query = async (sql: string) => (await adapter.queryRaw({ sql, args: [], argTypes: [] })).rows;
    const [[table]] = (await query(`SELECT to_regclass('_prisma_migrations')::text`)) as [[string | null]];
    if (!table) return false;
    const rows = (await query('SELECT migration_name, checksum, finished_at FROM _prisma_migrations WHERE rolled_back_at IS NULL')) as [
      string,
      string,
      unknown,
    ][];
    if (rows.some(([, , finishedAt]) => finishedAt === null)) return false;
    const recorded = new Map(rows.map(([name, checksum]) => [name, checksum]));
    if (recorded.size !== migrations.length) return false;
    return migrations.every((m) => recorded.get(m.name) === createHash('sha256').update(m.script).digest('hex'));
  } finally {
    await adapter.dispose();
  }
}

/**
 * Applies pending migrations from prisma/migrations with Prisma's WebAssembly schema engine,
 * recording them in `_prisma_migrations` exactly as `prisma migrate deploy` would, so either
 * tool can take over a database the other started.
 */
export async function applyMigrations(adapterFactory: SqlMigrationAwareDriverAdapterFactory): Promise<string[]> {
  const migrations = await readMigrations();
  if (await allApplied(adapterFactory, migrations)) return [];
  const lockfilePath = join(migrationsDir, 'migration_lock.toml');
  const engine = await openSchemaEngine(adapterFactory);
  try {
    const result = await engine.applyMigrations({
      migrationsList: {
        baseDir: migrationsDir,
        lockfile: { path: lockfilePath, content: await readFile(lockfilePath, 'utf8') },
        shadowDbInitScript: '',
        migrationDirectories: migrations.map(({ name, script }) => ({
          path: name,
          migrationFile: { path: 'migration.sql', content: { tag: 'ok' as const, value: script } },
        })),
      },
      filters: noFilters,
    } as Parameters<typeof engine.applyMigrations>[0]);
    return result.appliedMigrationNames;
  } finally {
    engine.free();
  }
}
