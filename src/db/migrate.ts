import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import type { SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import { noFilters, openSchemaEngine } from './schema-engine.ts';

const migrationsDir = fileURLToPath(new URL('../../prisma/migrations', import.meta.url));

/**
 * Applies pending migrations from prisma/migrations with Prisma's WebAssembly schema engine,
 * recording them in `_prisma_migrations` exactly as `prisma migrate deploy` would, so either
 * tool can take over a database the other started.
 */
export async function applyMigrations(adapterFactory: SqlMigrationAwareDriverAdapterFactory): Promise<string[]> {
  const entries = (await readdir(migrationsDir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  const migrationDirectories = await Promise.all(
    entries.map(async (name) => ({
      path: name,
      migrationFile: { path: 'migration.sql', content: { tag: 'ok' as const, value: await readFile(join(migrationsDir, name, 'migration.sql'), 'utf8') } },
    })),
  );
  const lockfilePath = join(migrationsDir, 'migration_lock.toml');
  const engine = await openSchemaEngine(adapterFactory);
  try {
    const result = await engine.applyMigrations({
      migrationsList: {
        baseDir: migrationsDir,
        lockfile: { path: lockfilePath, content: await readFile(lockfilePath, 'utf8') },
        shadowDbInitScript: '',
        migrationDirectories,
      },
      filters: noFilters,
    } as Parameters<typeof engine.applyMigrations>[0]);
    return result.appliedMigrationNames;
  } finally {
    engine.free();
  }
}
