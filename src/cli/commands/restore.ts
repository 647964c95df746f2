import { mkdir, rename, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import {
  type BackupHeader,
  BackupFileError,
  conflictingMedia,
  loadBackup,
  migrationsOf,
  placeMedia,
  readBackupHeader,
  verifyBackup,
} from '../../db/backup.ts';
import { liveLockHolder, lockDataDir } from '../../db/data-dir-lock.ts';
import { applyMigrations, type Migration, readMigrations } from '../../db/migrate.ts';
import { withPGlite } from '../../db/pglite-thread.ts';
import { buildSnapshot, isCluster } from '../../db/snapshot.ts';
import type { Sql } from '../../db/sql.ts';
import { checksum, column, describeTables } from '../../db/tables.ts';
import { type CliIo, say } from '../io.ts';
import { type Progress, progress } from '../progress.ts';
import { carryIntoRestore, sealedKeysIn } from './carry.ts';
import { embeddedConfig } from './embedded.ts';

/**
 * The job queue's declared queues: every service start writes them, so a directory a service only
 * started in has them and nothing a user made.
 */
const WRITTEN_BY_EVERY_START = new Set(['pgboss.queue']);

/** Rows a user's use left in the database of `pgdata`, by table (tables with none left out); empty for no database. */
async function rowsIn(pgdata: string): Promise<[string, number][]> {
  if (!(await isCluster(pgdata))) return [];
  return withPGlite(pgdata, async (sql) => {
    const tables = (await describeTables(sql)).filter((t) => !WRITTEN_BY_EVERY_START.has(t.name));
    const counts = await Promise.all(tables.map(async (t) => [t.name, (await checksum(sql, t)).rows] as [string, number]));
    return counts.filter(([, n]) => n > 0);
  });
}

/**
 * Every schema the migrations made (public, and the job queue's pgboss) dropped, and public made
 * again empty: what a new cluster has before its first migration.
 */
const EMPTY_SCHEMAS = `DO $$ DECLARE s text; BEGIN
    FOR s IN SELECT nspname FROM pg_namespace WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg\\_%' LOOP
      EXECUTE format('DROP SCHEMA %I CASCADE', s);
    END LOOP;
  END $$; CREATE SCHEMA public`;

/** Every table of the restored database against the backup's header: the same rows, the same checksum. */
async function compareWithHeader(sql: Sql, header: BackupHeader, path: string) {
  const tables = new Map((await describeTables(sql)).map((t) => [t.name, t]));
  for (const expected of header.tables) {
    const table = tables.get(expected.name)!;
    const actual = await checksum(
      sql,
      table,
      expected.columns.map((c) => column(table, c.name)),
    );
    if (actual.rows !== expected.rows || actual.checksum !== expected.checksum) {
      throw new BackupFileError(
        `Table ${expected.name} restored from ${path} differs from the backup (${actual.rows} rows, checksum ${actual.checksum}; the backup has ${expected.rows}, ${expected.checksum})`,
      );
    }
  }
}

/**
 * Makes the restored database in `staging`: a cluster migrated exactly as the backup's was,
 * loaded, checked against the backup, then migrated to this version; the media files go to
 * `mediaStaging`. Returns the migrations applied after loading. It starts as a copy of the
 * build's snapshot, which has every migration; for a backup made before some of them, the
 * snapshot's schemas are emptied and migrated only as far as the backup's was (quicker than a
 * new cluster: initdb takes seconds).
 */
async function build(
  io: CliIo,
  staging: string,
  path: string,
  header: BackupHeader,
  migrations: Migration[],
  known: Migration[],
  mediaStaging: string,
) {
  let bar: Progress | undefined;
  const current = migrations.length === known.length;
  return withPGlite(
    staging,
    async (sql, { fromSnapshot }) => {
      if (fromSnapshot && !current) await sql.exec(EMPTY_SCHEMAS);
      if (!fromSnapshot || !current) await applyMigrations(sql, { migrations });
      await loadBackup(path, sql, mediaStaging, (done, total) => {
        bar ??= progress('restore', 'rows', total, io.stderr);
        bar.update(done);
      }).finally(() => bar?.stop());
      await compareWithHeader(sql, header, path);
      const later = await applyMigrations(sql, { migrations: known });
      return { later, sealed: await sealedKeysIn(sql) };
    },
    buildSnapshot,
  );
}

/**
 * `parley restore <file>`: the backup's database becomes DATA_DIR's, and its media files go to
 * MEDIA_DIR. Refuses a file that is not a complete backup this version can read, a data
 * directory a process holds, one holding data unless `force`, and media files MEDIA_DIR holds
 * with other content, all before changing anything. The database and the media files are made
 * aside; only once the database is complete and checked do the files join MEDIA_DIR (never over
 * one there) and the database take the old one's place.
 */
export async function restore(io: CliIo, file: string, force: boolean, json: boolean): Promise<number> {
  const { config, dataDir, pgdata } = embeddedConfig(
    io,
    'restore',
    'restore into a data directory, then copy it to PostgreSQL with parley db copy',
  );
  const path = resolve(file);
  const started = performance.now();
  const header = await readBackupHeader(path);
  const known = await readMigrations();
  const migrations = migrationsOf(header, known, path);
  const holder = await liveLockHolder(dataDir);
  if (holder) throw new Error(`${dataDir} is in use by another parley process (pid ${holder}): stop it first, then restore.`);
  const rows = header.tables.reduce((n, t) => n + t.rows, 0);
  const check = progress('check', 'lines', rows, io.stderr);
  const { media } = await verifyBackup(path, (lines) => check.update(Math.min(lines, rows))).finally(() => check.stop());
  const conflicts = await conflictingMedia(config.mediaDir, media);
  if (conflicts.length) {
    throw new BackupFileError(
      `${config.mediaDir} already holds ${conflicts.length} of the backup's media files with other content (${conflicts.slice(0, 5).join(', ')}${conflicts.length > 5 ? ', …' : ''}). ` +
        'A restore writes over no file: move them away, or set MEDIA_DIR to another folder, and restore again.',
    );
  }

  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const unlock = await lockDataDir(dataDir);
  const staging = join(dataDir, 'pgdata.restoring');
  const mediaStaging = join(dataDir, 'media.restoring');
  try {
    const held = await rowsIn(pgdata);
    if (held.length && !force) {
      throw new Error(
        `${dataDir} holds a database with data (${held.map(([t, n]) => `${t} ${n}`).join(', ')}). ` +
          'Restoring replaces it: run again with --force to do so (make a backup of it first if you may want it back).',
      );
    }
    await rm(staging, { recursive: true, force: true });
    await rm(mediaStaging, { recursive: true, force: true });
    const { later, sealed } = await build(io, staging, path, header, migrations, known, mediaStaging);
    await placeMedia(mediaStaging, config.mediaDir, media);
    const replaced = join(dataDir, `pgdata.replaced-${process.pid}`);
    if (await isCluster(pgdata)) await rename(pgdata, replaced);
    else await rm(pgdata, { recursive: true, force: true });
    await rename(staging, pgdata);
    await rm(replaced, { recursive: true, force: true });
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    const carry = await carryIntoRestore(config, sealed);
    say(
      io,
      json
        ? JSON.stringify({
            file: path,
            dataDir,
            createdAt: header.createdAt,
            tables: header.tables,
            media: header.media,
            migrated: later,
            sealedKeys: sealed,
            carry,
          })
        : [
            `Restored ${path} (made by parley ${header.parley} at ${header.createdAt}) into ${dataDir} in ${seconds} s.`,
            `${rows} rows in ${header.tables.length} tables, every table's count and checksum as in the backup; ${header.media.files} media files into ${config.mediaDir}.`,
            later.length ? `Then migrated: ${later.join(', ')}.` : 'Its migrations are this version’s: nothing to migrate.',
            ...carry,
          ].join('\n'),
    );
    return 0;
  } catch (e) {
    await rm(staging, { recursive: true, force: true });
    throw e;
  } finally {
    await rm(mediaStaging, { recursive: true, force: true });
    await unlock();
  }
}
