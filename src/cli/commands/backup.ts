import { rmSync } from 'node:fs';
import { access, constants, rm } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { callService, NoServiceError } from '../../control/socket.ts';
import { type BackupSummary, partialPath, writeBackup } from '../../db/backup.ts';
import { liveLockHolder, lockDataDir } from '../../db/data-dir-lock.ts';
import { withPGlite } from '../../db/pglite-thread.ts';
import { copyTreeSync } from '../../db/cluster-files.js';
import { isCluster } from '../../db/snapshot.ts';
import { type CliIo, say } from '../io.ts';
import { type Progress, progress } from '../progress.ts';
import { carryFromBackup, sealedKeysIn } from './carry.ts';
import { embeddedConfig, removeLeftovers } from './embedded.ts';

const literally = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * A copy of the database's files as they were at one instant, in `dir`. With a service running
 * (which alone writes its files), this process copies them while it serves, and then the service,
 * holding every statement back, copies again only what changed meanwhile
 * (cluster-files.js). Stopped, this process copies them while it holds the data directory, so
 * that no service starts meanwhile. The live files are only read.
 */
async function copyDatabase(dataDir: string, pgdata: string, dir: string): Promise<string> {
  const holder = await liveLockHolder(dataDir);
  if (holder) {
    const manifest = `${dir}.manifest.json`;
    copyTreeSync(pgdata, dir, manifest);
    try {
      const { ms } = await callService(dataDir, 'backup.copy', { dir, manifest });
      return `copied while the service (pid ${holder}) ran, which then held its statements ${ms} ms for what changed meanwhile`;
    } catch (e) {
      if (!(e instanceof NoServiceError)) throw e;
      throw new Error(
        `The embedded database in ${dataDir} is in use by another parley process (pid ${holder}) that takes no commands ` +
          '(another CLI command, or a service started by an older version). Wait for it to finish, or stop it, and run the backup again.',
      );
    }
  }
  const unlock = await lockDataDir(dataDir);
  try {
    copyTreeSync(pgdata, dir);
  } finally {
    await unlock();
  }
  return 'copied while no service ran';
}

const size = (bytes: number) =>
  bytes >= 1024 ** 3
    ? `${(bytes / 1024 ** 3).toFixed(1)} GB`
    : bytes >= 1024 ** 2
      ? `${(bytes / 1024 ** 2).toFixed(1)} MB`
      : `${Math.ceil(bytes / 1024)} KB`;

function describe(path: string, summary: BackupSummary, copied: string, seconds: number): string {
  const { header } = summary;
  const rows = header.tables.reduce((n, t) => n + t.rows, 0);
  const nonEmpty = header.tables.filter((t) => t.rows > 0);
  return [
    `Backup written to ${path} (${size(summary.bytes)}) in ${seconds.toFixed(1)} s.`,
    `The database as of ${header.createdAt}, ${copied}: everything acknowledged before the backup began.`,
    `${rows} rows in ${header.tables.length} tables${nonEmpty.length ? ` (${nonEmpty.map((t) => `${t.name} ${t.rows}`).join(', ')})` : ''}; ` +
      `${header.media.files} media files (${size(header.media.bytes)}); migrations up to ${header.migrations.at(-1)?.name ?? 'none'}.`,
    `Restore it with: parley restore ${path}`,
  ].join('\n');
}

/** `parley backup <file>`: the embedded database and its media files, in one file (db/backup.ts). */
export async function backup(io: CliIo, file: string, json: boolean): Promise<number> {
  const { config, dataDir, pgdata } = embeddedConfig(
    io,
    'backup',
    'back up PostgreSQL with its own tools (pg_dump), see docs/operations.md',
  );
  if (!(await isCluster(pgdata))) throw new Error(`There is no database in ${dataDir} to back up`);
  const path = resolve(file);
  await access(dirname(path), constants.W_OK).catch(() => {
    throw new Error(`Cannot write the backup into ${dirname(path)}: it does not exist or is not writable`);
  });
  // What interrupted backups left: their copies of the database, and their unfinished files.
  await removeLeftovers(dataDir, /^\.backup-(\d+)$/);
  await removeLeftovers(dirname(path), new RegExp(`^\\.${literally(basename(path))}\\.(\\d+)\\.partial$`));
  const scratch = join(dataDir, `.backup-${process.pid}`);
  // Ctrl-C ends the process without running `finally`: what it made so far goes with it.
  const interrupted = () => {
    rmSync(scratch, { recursive: true, force: true });
    rmSync(partialPath(path), { force: true });
    process.exit(130);
  };
  process.once('SIGINT', interrupted).once('SIGTERM', interrupted);
  const started = performance.now();
  let bar: Progress | undefined;
  try {
    const copied = await copyDatabase(dataDir, pgdata, join(scratch, 'pgdata'));
    const { summary, sealed } = await withPGlite(join(scratch, 'pgdata'), async (sql) => ({
      summary: await writeBackup(sql, path, config.mediaDir, {
        onRows: (done, total) => {
          bar ??= progress('backup', 'rows', total, io.stderr);
          bar.update(done);
        },
      }),
      sealed: await sealedKeysIn(sql),
    })).finally(() => bar?.stop());
    const { header } = summary;
    const carry = await carryFromBackup(config, sealed, header.media.files);
    say(
      io,
      json
        ? JSON.stringify({
            file: path,
            bytes: summary.bytes,
            createdAt: header.createdAt,
            tables: header.tables,
            media: header.media,
            sealedKeys: sealed,
            carry,
          })
        : [describe(path, summary, copied, (performance.now() - started) / 1000), ...carry].join('\n'),
    );
    return 0;
  } finally {
    await rm(scratch, { recursive: true, force: true });
    process.off('SIGINT', interrupted).off('SIGTERM', interrupted);
  }
}
