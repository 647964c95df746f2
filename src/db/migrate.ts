import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeSqlError, type Sql, type SqlDatabase } from './sql.ts';

export const migrationsDir = fileURLToPath(new URL('../../prisma/migrations', import.meta.url));

export interface Migration {
  name: string;
  script: string;
  /** As Prisma records it: SHA-256 of the script's text. */
  checksum: string;
}

/** The migration folders of `dir`, in the order they apply (by name: they start with a timestamp). */
export async function readMigrations(dir = migrationsDir): Promise<Migration[]> {
  const names = (await readdir(dir, { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const script = await readFile(join(dir, name, 'migration.sql'), 'utf8');
      return { name, script, checksum: createHash('sha256').update(script).digest('hex') };
    }),
  );
}

/** A migration could not be applied, or the database's record of them forbids going on. */
export class MigrationError extends Error {}

/** The table Prisma records migrations in, exactly as it creates it, so either tool can take over. */
const RECORD_TABLE = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

export interface AppliedMigration {
  name: string;
  checksum: string;
}

/** What `_prisma_migrations` records as applied, oldest first; none on a database without it. */
export async function appliedMigrations(sql: Sql): Promise<AppliedMigration[]> {
  const [[table]] = (await sql.rows(`SELECT to_regclass('"_prisma_migrations"')::text`)) as [[string | null]];
  if (!table) return [];
  const rows = (await sql.rows(
    `SELECT migration_name, checksum, (finished_at IS NULL)::text, coalesce(logs, '') FROM "_prisma_migrations"
     WHERE rolled_back_at IS NULL ORDER BY migration_name`,
  )) as [string, string, string, string][];
  const failed = rows.filter(([, , unfinished]) => unfinished === 'true');
  if (failed.length) {
    throw new MigrationError(
      `The database has failed migrations that a tool (prisma migrate) left recorded: ${failed
        .map(([name, , , logs]) => `${name}${logs ? ` (${logs.trim().split('\n')[0]})` : ''}`)
        .join(', ')}. Restore the database from a backup, or undo what the migration did and mark it rolled back ` +
        '(npx prisma migrate resolve --rolled-back <name>), then start again.',
    );
  }
  return rows.map(([name, checksum]) => ({ name, checksum }));
}

/** The migrations of `known` that `applied` lacks; refuses a database migrated by a newer parley. */
function pendingMigrations(known: Migration[], applied: AppliedMigration[]): Migration[] {
  const names = new Set(known.map((m) => m.name));
  const unknown = applied.filter((a) => !names.has(a.name));
  if (unknown.length) {
    throw new MigrationError(
      `The database was migrated by a newer parley: it has migrations this version does not know (${unknown.map((a) => a.name).join(', ')}). ` +
        'Run the parley that migrated it, or a newer one.',
    );
  }
  const done = new Set(applied.map((a) => a.name));
  return known.filter((m) => !done.has(m.name));
}

/**
 * Applies one migration inside the caller's transaction and records it as Prisma does.
 * `before`: the last migration applied before that transaction, where a failure leaves the database.
 */
async function applyOne(tx: Sql, migration: Migration, before: string | undefined) {
  const [[startedAt]] = (await tx.rows('SELECT clock_timestamp()::text')) as [[string]];
  try {
    await tx.exec(migration.script);
  } catch (e) {
    throw new MigrationError(
      `Migration ${migration.name} failed: ${describeSqlError(e)}\nNothing was changed: the database is as it was ` +
        `(${before ? `migrated up to ${before}` : 'not migrated'}), and the next start tries again.`,
    );
  }
  await tx.rows(
    `INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, started_at, applied_steps_count)
     VALUES (gen_random_uuid()::text, $1, clock_timestamp(), $2, $3::text::timestamptz, 1)`,
    [migration.checksum, migration.name, startedAt],
  );
}

/**
 * Applies the migrations of prisma/migrations (or `options.migrations`) the database lacks, all in
 * one transaction: either every one applies, or none does and the database is left exactly as it
 * was, with an error naming the migration that failed and why. Each is recorded in
 * `_prisma_migrations` as `prisma migrate deploy` records it, so either tool can take over a
 * database the other started. Returns the names applied.
 */
export async function applyMigrations(database: SqlDatabase, options: { migrations?: Migration[] } = {}): Promise<string[]> {
  const known = options.migrations ?? (await readMigrations());
  // Most starts find nothing to do: one read, no transaction.
  if (!pendingMigrations(known, await appliedMigrations(database)).length) return [];
  return database.transaction(async (tx) => {
    await tx.exec(RECORD_TABLE);
    const applied = await appliedMigrations(tx);
    const pending = pendingMigrations(known, applied);
    for (const migration of pending) await applyOne(tx, migration, applied.at(-1)?.name);
    return pending.map((m) => m.name);
  });
}
