import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { newDatabaseOn } from './database.ts';

const migrationsDir = fileURLToPath(new URL('../../prisma/migrations', import.meta.url));

export interface RawDatabase {
  exec(script: string): Promise<void>;
  rows<T>(sql: string): Promise<T[]>;
  close(): Promise<void>;
}

/**
 * Plain SQL on the database the suite runs on (PGlite, or a new database on TEST_DATABASE_URL),
 * for migration tests: rows are made as an older schema held them, then one migration runs.
 */
export async function rawDatabase(): Promise<RawDatabase> {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) {
    const lite = new PGlite();
    return {
      exec: (script) => lite.exec(script).then(() => {}),
      rows: async <T>(sql: string) => (await lite.query<T>(sql)).rows,
      close: () => lite.close(),
    };
  }
  const { url, drop } = await newDatabaseOn(server);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return {
    exec: (script) => client.query(script).then(() => {}),
    rows: async <T>(sql: string) => (await client.query(sql)).rows as T[],
    close: async () => {
      await client.end();
      await drop();
    },
  };
}

/** The SQL of one migration folder. */
export const migrationScript = (name: string) => readFile(`${migrationsDir}/${name}/migration.sql`, 'utf8');

/** Applies, in order, every migration older than `name`: the schema as it was just before it. */
export async function migrateUpTo(db: RawDatabase, name: string) {
  const names = (await readdir(migrationsDir)).filter((n) => /^\d/.test(n)).sort();
  for (const older of names.filter((n) => n < name)) await db.exec(await migrationScript(older));
}
