import { readdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { type CopyReport, copyToPostgres } from '../../db/copy.ts';
import { liveLockHolder, lockDataDir } from '../../db/data-dir-lock.ts';
import { withPGlite } from '../../db/pglite-thread.ts';
import { isCluster } from '../../db/snapshot.ts';
import { describePostgresUrl } from '../../db/sql.ts';
import { hidePasswords } from '../../passwords.ts';
import { type CliIo, say, warn } from '../io.ts';
import { type Progress, progress } from '../progress.ts';
import { carryToPostgres, sealedKeysIn } from './carry.ts';
import { embeddedConfig } from './embedded.ts';

function checkUrl(to: string): string {
  let url: URL | undefined;
  try {
    url = new URL(to);
  } catch {
    url = undefined;
  }
  if (!url || !['postgres:', 'postgresql:'].includes(url.protocol)) {
    throw new Error(
      `--to takes a PostgreSQL URL, such as postgres://parley:secret@db.example.com:5432/parley (not ${JSON.stringify(hidePasswords(to))})`,
    );
  }
  return to;
}

function table(report: CopyReport): string {
  const rows = [
    ['table', 'rows (embedded)', 'checksum (embedded)', 'rows (PostgreSQL)', 'checksum (PostgreSQL)', ''],
    ...report.tables.map((t) => {
      const same = t.source.rows === t.target.rows && t.source.checksum === t.target.checksum;
      return [t.name, String(t.source.rows), t.source.checksum, String(t.target.rows), t.target.checksum, same ? 'same' : 'DIFFERENT'];
    }),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** `parley db copy --to <url>`: the embedded database (stopped) into PostgreSQL (db/copy.ts). */
export async function copy(io: CliIo, to: string, options: { force: boolean; withoutPgvector: boolean; json: boolean }): Promise<number> {
  const { config, dataDir, pgdata } = embeddedConfig(
    io,
    'db copy',
    'unset it to copy the embedded database in DATA_DIR, and name the PostgreSQL database with --to',
  );
  const url = checkUrl(to);
  if (!(await isCluster(pgdata))) throw new Error(`There is no database in ${dataDir} to copy`);
  const holder = await liveLockHolder(dataDir);
  if (holder) {
    throw new Error(
      `The embedded database in ${dataDir} is in use by a running parley (pid ${holder}). Stop it first: what it writes after the copy ` +
        'would not reach PostgreSQL. (To rehearse while it serves: parley backup, restore into another DATA_DIR, and copy from that one.)',
    );
  }
  const source = resolve(dataDir);
  const unlock = await lockDataDir(dataDir);
  let bar: Progress | undefined;
  let report: CopyReport;
  let sealed: Awaited<ReturnType<typeof sealedKeysIn>> = [];
  try {
    report = await withPGlite(pgdata, async (sql) => {
      const copied = await copyToPostgres(sql, source, url, {
        force: options.force,
        withoutPgvector: options.withoutPgvector,
        onNotice: (line) => warn(io, line),
        onProgress: (done, total) => {
          bar ??= progress('copy', 'rows', total, io.stderr);
          bar.update(done);
        },
      });
      sealed = await sealedKeysIn(sql);
      return copied;
    }).finally(() => bar?.stop());
  } finally {
    await unlock();
  }
  const same = report.tables.every((t) => t.source.rows === t.target.rows && t.source.checksum === t.target.checksum);
  const mediaFiles = (await readdir(config.mediaDir, { withFileTypes: true }).catch(() => [])).filter(
    (e) => e.isFile() && !e.name.startsWith('.'),
  ).length;
  const carry = await carryToPostgres(config, sealed, mediaFiles);
  if (options.json) say(io, JSON.stringify({ target: describePostgresUrl(url), ...report, same, sealedKeys: sealed, carry }));
  else {
    say(io, table(report));
    say(
      io,
      same
        ? [
            `Every table matches: ${report.tables.reduce((n, t) => n + t.target.rows, 0)} rows copied to PostgreSQL at ${describePostgresUrl(url)}.`,
            report.embeddings.includes('real[]')
              ? 'Embeddings are stored as real[] (no pgvector there): search scans every creation. Install pgvector on the server and run `parley migrate` with DATABASE_URL set to convert them and build the index.'
              : 'Embeddings are stored as pgvector vectors, with the HNSW index.',
            ...carry,
            'Start parley on it with DATABASE_URL set to that URL (DATABASE_URL=... npm start).',
          ].join('\n')
        : 'Some tables differ (above): did something change the embedded database during the copy? Run again with --force to copy it all again.',
    );
  }
  return same ? 0 : 1;
}
