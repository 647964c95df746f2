import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DatabaseConfig, SecretsConfig } from '../../src/config.ts';
import { type ConfigOverrides, startTestApp, type TestApp } from './app.ts';
import { freshDatabase, onRealPostgres } from './database.ts';
import type { Start } from './set-up.ts';

/**
 * Data moved without the key its secrets are sealed with, as tests of sealed secrets (deployments'
 * tokens, webhooks' signing secrets) stage it: one database the real app opens in turn, each time
 * with the key it is given, and two key files: the one the secrets were sealed with, and where a
 * move puts the data without it.
 */
export interface MovedKeys {
  database: DatabaseConfig;
  /** The key file of the data directory the secrets were sealed in (made by the first start). */
  sealedIn: string;
  /** A key file in another directory, not there until a test puts it there. */
  elsewhere: string;
}

/** The secrets setting: none of key, key file or shared unless given. */
export const secrets = (s: Partial<SecretsConfig>): SecretsConfig => ({
  key: undefined,
  previous: [],
  keyFile: undefined,
  shared: false,
  ...s,
});

/** One database the apps open in turn: a new one on PostgreSQL, or an embedded data directory. */
async function sharedDatabase(): Promise<{ config: DatabaseConfig; drop(): Promise<void> }> {
  if (onRealPostgres()) return freshDatabase();
  const dataDir = await mkdtemp(join(tmpdir(), 'parley-moved-'));
  return { config: { kind: 'pglite', dataDir }, drop: () => rm(dataDir, { recursive: true, force: true }) };
}

/** The database and the two key files, removed when the test file ends. */
export async function movedKeys(start: Start): Promise<MovedKeys> {
  const db = await start.service(sharedDatabase(), (d) => d.drop());
  const dirs = await start.service(Promise.all([mkdtemp(join(tmpdir(), 'parley-key-')), mkdtemp(join(tmpdir(), 'parley-key-'))]), (made) =>
    Promise.all(made.map((d) => rm(d, { recursive: true, force: true }))),
  );
  return { database: db.config, sealedIn: join(dirs[0], 'secrets.key'), elsewhere: join(dirs[1], 'secrets.key') };
}

/** Runs `check` on an app over `database` started with `overrides`, then closes it (also when `check` fails). */
export async function startedOn<T>(database: DatabaseConfig, overrides: ConfigOverrides, check: (t: TestApp) => Promise<T>): Promise<T> {
  const t = await startTestApp(overrides, database);
  try {
    return await check(t);
  } finally {
    await t.close();
  }
}

/** A path as a regular expression matching it literally. */
export const literally = (path: string) => path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
