import { createHash } from 'node:crypto';
import { constants, createReadStream, createWriteStream } from 'node:fs';
import { copyFile, link, mkdir, open, readdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import { basename, dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { type AppliedMigration, appliedMigrations, type Migration } from './migrate.ts';
import type { Sql } from './sql.ts';
import { checksum, describeTables, insertRows, readRows, readSequences, TEXT_SETTINGS, type Table, writeSequences } from './tables.ts';

/**
 * parley's backup file: gzip-compressed lines of JSON.
 *   1. the header (BackupHeader): what made it, the migrations its database had, and each
 *      table's columns, row count and checksum, the sequences' values, the media files;
 *   2. per table, in the header's order: {"table": name}, then one line per row, the array of
 *      its columns' text (tables.ts: every value exactly as PostgreSQL prints it);
 *   3. per media file: {"media": name, "bytes": n}, then its content as base64 JSON strings;
 *   4. {"end": true, "sha256": ...} over every line before it: a file without it was cut short.
 * A logical copy, not PGlite's files: it restores into any later parley, whatever PostgreSQL
 * version that one embeds, and older backups are migrated forward after loading.
 */
export const BACKUP_FORMAT = 1;

export interface BackupHeader {
  parleyBackup: number;
  parley: string;
  createdAt: string;
  postgres: string;
  migrations: AppliedMigration[];
  tables: { name: string; columns: { name: string; type: string }[]; rows: number; checksum: string }[];
  sequences: { name: string; value: string; called: boolean }[];
  media: { files: number; bytes: number };
}

const MEDIA_CHUNK = 768 * 1024;

async function parleyVersion(): Promise<string> {
  const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

async function mediaFiles(dir: string | undefined) {
  if (!dir) return [];
  const entries = await readdir(dir, { withFileTypes: true }).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return [];
    throw e;
  });
  const files = entries.filter((e) => e.isFile() && !e.name.startsWith('.')).map((e) => e.name);
  return Promise.all(files.sort().map(async (name) => ({ name, bytes: (await stat(join(dir, name))).size })));
}

export interface BackupProgress {
  /** Rows written so far, of all tables' rows. */
  onRows?(done: number, total: number): void;
}

/** What a backup holds, as its header says. */
export interface BackupSummary {
  header: BackupHeader;
  bytes: number;
}

/** Where a backup to `path` is written until it is complete (`pid`: the process writing it). */
export const partialPath = (path: string, pid = process.pid) => join(dirname(path), `.${basename(path)}.${pid}.partial`);

/**
 * Writes a backup of the database `sql` reads (which must not change meanwhile: a copy made
 * for the purpose, see Database.copyTo) and of the files in `mediaDir` to `path`. It is written
 * under a temporary name beside `path`, flushed to disk and renamed: `path` is never half
 * written, whatever interrupts this.
 */
export async function writeBackup(
  sql: Sql,
  path: string,
  mediaDir: string | undefined,
  progress: BackupProgress = {},
): Promise<BackupSummary> {
  await sql.exec(TEXT_SETTINGS);
  const tables = await describeTables(sql);
  const sums = await Promise.all(tables.map((t) => checksum(sql, t)));
  const media = await mediaFiles(mediaDir);
  const [[postgres]] = (await sql.rows('SHOW server_version')) as [[string]];
  const header: BackupHeader = {
    parleyBackup: BACKUP_FORMAT,
    parley: await parleyVersion(),
    createdAt: new Date().toISOString(),
    postgres,
    migrations: await appliedMigrations(sql),
    tables: tables.map((t, i) => ({ name: t.name, columns: t.columns.map(({ name, type }) => ({ name, type })), ...sums[i]! })),
    sequences: await readSequences(sql),
    media: { files: media.length, bytes: media.reduce((n, f) => n + f.bytes, 0) },
  };
  const total = header.tables.reduce((n, t) => n + t.rows, 0);
  const temporary = partialPath(path);
  async function* lines() {
    const hash = createHash('sha256');
    const line = (text: string) => {
      hash.update(text).update('\n');
      return `${text}\n`;
    };
    yield line(JSON.stringify(header));
    let done = 0;
    for (const t of tables) {
      yield line(JSON.stringify({ table: t.name }));
      for await (const page of readRows(sql, t, null)) {
        yield page.map(line).join('');
        progress.onRows?.((done += page.length), total);
      }
    }
    for (const file of media) {
      yield line(JSON.stringify({ media: file.name, bytes: file.bytes }));
      const content = await readFile(join(mediaDir!, file.name));
      for (let at = 0; at < content.length; at += MEDIA_CHUNK) {
        yield line(JSON.stringify(content.subarray(at, at + MEDIA_CHUNK).toString('base64')));
      }
    }
    yield `${JSON.stringify({ end: true, sha256: hash.digest('hex') })}\n`;
  }
  try {
    await pipeline(lines, createGzip(), createWriteStream(temporary, { flags: 'wx', mode: 0o600 }));
    const written = await open(temporary, 'r+');
    await written.sync().finally(() => written.close());
    await rename(temporary, path);
  } catch (e) {
    await rm(temporary, { force: true });
    throw e;
  }
  await syncDirectory(dirname(path));
  return { header, bytes: (await stat(path)).size };
}

/** Makes a rename in `dir` durable (where the platform allows opening a directory). */
async function syncDirectory(dir: string) {
  const handle = await open(dir, 'r').catch(() => null);
  await handle
    ?.sync()
    .catch(() => {})
    .finally(() => handle.close());
}

/** A file that is not a backup this parley can read, said plainly. */
export class BackupFileError extends Error {}

/**
 * How many times its size a backup may decompress to. parley's backups decompress to about 11
 * times theirs (the demo's, mostly embeddings as text) and far less with media (PNG in base64);
 * gzip can reach a thousand, which is how a decompression bomb fills a disk from a small file.
 */
export const MAX_EXPANSION = 100;
/** What any backup may decompress to, however small (a header alone compresses poorly). */
const MIN_ALLOWANCE = 16 * 1024 * 1024;

/**
 * The lines of a backup file, decompressed, with read and decompression errors said plainly. A
 * file that decompresses to more than MAX_EXPANSION times its size is refused as soon as it
 * does: every reader (the header, the check, the load) stops there, before writing anything.
 */
async function* backupLines(path: string): AsyncGenerator<string> {
  const { size } = await stat(path);
  const allowed = Math.max(size * MAX_EXPANSION, MIN_ALLOWANCE);
  const file = createReadStream(path);
  const gunzip = createGunzip();
  file.on('error', (e) => gunzip.destroy(e));
  file.pipe(gunzip);
  const decoder = new StringDecoder('utf8');
  let inflated = 0;
  let rest = '';
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) {
      inflated += chunk.length;
      if (inflated > allowed) throw expands(path, size);
      const parts = (rest + decoder.write(chunk)).split('\n');
      rest = parts.pop()!;
      yield* parts;
    }
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'Z_DATA_ERROR') throw new BackupFileError(`${path} is not a parley backup (it is not gzip-compressed, or is damaged)`);
    if (code === 'Z_BUF_ERROR') throw truncated(path);
    throw e;
  } finally {
    file.destroy();
    gunzip.destroy();
  }
  rest += decoder.end();
  if (rest) throw truncated(path);
}

const expands = (path: string, size: number) =>
  new BackupFileError(
    `${path} decompresses to more than ${MAX_EXPANSION} times its size (${size} bytes), which no parley backup does: ` +
      'refused before anything was written (it is a decompression bomb, or damaged)',
  );

const truncated = (path: string) =>
  new BackupFileError(`${path} is truncated: it ends before the backup does (it was not written completely, or was cut short when copied)`);

const parseHeader = (path: string, line: string | undefined): BackupHeader => {
  let header: Partial<BackupHeader> | undefined;
  try {
    header = line ? JSON.parse(line) : undefined;
  } catch {
    header = undefined;
  }
  if (!header || typeof header.parleyBackup !== 'number')
    throw new BackupFileError(`${path} is not a parley backup (no parley backup header)`);
  if (header.parleyBackup > BACKUP_FORMAT) {
    throw new BackupFileError(
      `${path} was made by a newer parley (${header.parley}, backup format ${header.parleyBackup}); this one (format ${BACKUP_FORMAT}) cannot read it. Restore it with that version or a newer one.`,
    );
  }
  return header as BackupHeader;
};

/** The header alone (the first line), to refuse a file early. */
export async function readBackupHeader(path: string): Promise<BackupHeader> {
  for await (const line of backupLines(path)) return parseHeader(path, line);
  return parseHeader(path, undefined);
}

/**
 * Refuses a backup whose database has migrations this parley does not know (a newer parley made
 * it), before anything is changed. Returns the known migrations its database had, in order.
 */
export function migrationsOf(header: BackupHeader, known: Migration[], path: string): Migration[] {
  const byName = new Map(known.map((m) => [m.name, m]));
  const unknown = header.migrations.filter((m) => !byName.has(m.name));
  if (unknown.length) {
    throw new BackupFileError(
      `${path} was made by a newer parley (${header.parley}): its database has migrations this version does not know (${unknown.map((m) => m.name).join(', ')}). Restore it with that version or a newer one.`,
    );
  }
  return header.migrations.map((m) => byName.get(m.name)!);
}

type Section = { table: string } | { media: string; bytes: number };

/** A media file a backup holds: its name, size and SHA-256 (hex). */
export interface BackupMedia {
  name: string;
  bytes: number;
  sha256: string;
}

/** What a whole backup file holds, as read and checked by verifyBackup. */
export interface VerifiedBackup {
  header: BackupHeader;
  media: BackupMedia[];
}

/**
 * Reads the whole file and checks it against its header and its final checksum, changing
 * nothing: a truncated or damaged file, or one naming a media file outside its folder, is
 * refused before a restore touches anything. Returns each media file's digest, for the restore
 * to compare with the files already there before it writes any.
 */
export async function verifyBackup(path: string, onLines?: (lines: number) => void): Promise<VerifiedBackup> {
  let header: BackupHeader | undefined;
  const hash = createHash('sha256');
  const rows = new Map<string, number>();
  const media = new Map<string, { bytes: number; hash: ReturnType<typeof createHash> }>();
  let section: Section | undefined;
  let lines = 0;
  let end: { sha256?: string } | undefined;
  for await (const line of backupLines(path)) {
    if (end) throw new BackupFileError(`${path} has data after its end: it is damaged`);
    if (!header) header = parseHeader(path, line);
    else if (line.startsWith('{"end":')) {
      end = JSON.parse(line);
      continue;
    } else if (line.startsWith('{')) {
      section = JSON.parse(line) as Section;
      if ('media' in section) media.set(safeMediaName(section.media, path), { bytes: 0, hash: createHash('sha256') });
    } else if (section && 'table' in section) rows.set(section.table, (rows.get(section.table) ?? 0) + 1);
    else if (section) {
      const content = Buffer.from(JSON.parse(line) as string, 'base64');
      const file = media.get(section.media)!;
      file.bytes += content.length;
      file.hash.update(content);
    }
    hash.update(line).update('\n');
    if (++lines % 10_000 === 0) onLines?.(lines);
  }
  if (!header || !end) throw truncated(path);
  if (end.sha256 !== hash.digest('hex')) throw new BackupFileError(`${path} is damaged: its content does not match its checksum`);
  for (const t of header.tables) {
    if ((rows.get(t.name) ?? 0) !== t.rows)
      throw new BackupFileError(`${path} is damaged: table ${t.name} has ${rows.get(t.name) ?? 0} rows, its header says ${t.rows}`);
  }
  const files = [...media].map(([name, f]) => ({ name, bytes: f.bytes, sha256: f.hash.digest('hex') }));
  const mediaTotal = files.reduce((n, f) => n + f.bytes, 0);
  if (files.length !== header.media.files || mediaTotal !== header.media.bytes) {
    throw new BackupFileError(
      `${path} is damaged: it holds ${files.length} media files (${mediaTotal} bytes), its header says ${header.media.files} (${header.media.bytes} bytes)`,
    );
  }
  return { header, media: files };
}

const ROWS_PER_INSERT = 500;

/**
 * Loads a verified backup into `sql`: an empty database migrated exactly as the backup's was.
 * Foreign keys are not checked while loading (the rows are those of a consistent database, in
 * any order), which needs the superuser an embedded database runs as. Media files go to
 * `stagingDir`, a folder of the restore's own: they reach MEDIA_DIR only once everything has
 * been checked (`placeMedia`).
 */
export async function loadBackup(
  path: string,
  sql: Sql,
  stagingDir: string,
  onRows?: (done: number, total: number) => void,
): Promise<BackupHeader> {
  await sql.exec(`${TEXT_SETTINGS}; SET session_replication_role TO replica`);
  await mkdir(stagingDir, { recursive: true });
  const tables = new Map((await describeTables(sql)).map((t) => [t.name, t]));
  let header: BackupHeader | undefined;
  let table: { source: Table; target: Table } | undefined;
  let media: { name: string; chunks: Buffer[] } | undefined;
  let batch: string[] = [];
  let done = 0;
  let total = 0;
  const flush = async () => {
    if (!batch.length) return;
    await insertRows(sql, table!.source, table!.target, batch);
    onRows?.((done += batch.length), total);
    batch = [];
  };
  const finishSection = async () => {
    await flush();
    if (media) await writeFile(join(stagingDir, media.name), Buffer.concat(media.chunks));
    table = undefined;
    media = undefined;
  };
  for await (const line of backupLines(path)) {
    if (!header) {
      header = parseHeader(path, line);
      total = header.tables.reduce((n, t) => n + t.rows, 0);
    } else if (line.startsWith('[')) {
      batch.push(line);
      if (batch.length >= ROWS_PER_INSERT) await flush();
    } else if (line.startsWith('"')) media!.chunks.push(Buffer.from(JSON.parse(line) as string, 'base64'));
    else {
      await finishSection();
      const next = JSON.parse(line) as Section | { end: true };
      if ('table' in next) table = matchTable(header, next.table, tables, path);
      else if ('media' in next) media = { name: safeMediaName(next.media, path), chunks: [] };
    }
  }
  await sql.exec('SET session_replication_role TO DEFAULT');
  await writeSequences(sql, header!.sequences);
  return header!;
}

/** The table a backup's section fills, which must have the same columns here. */
function matchTable(header: BackupHeader, name: string, tables: Map<string, Table>, path: string) {
  const described = header.tables.find((t) => t.name === name);
  const target = tables.get(name);
  const names = (cs: { name: string }[]) =>
    cs
      .map((c) => c.name)
      .sort()
      .join(',');
  if (!described || !target || names(described.columns) !== names(target.columns)) {
    throw new BackupFileError(`${path} does not match the database its migrations make (table ${name}): it is damaged or was edited`);
  }
  // Loading with foreign keys off: no column waits for a second pass.
  return {
    source: { ...target, columns: described.columns.map((c) => ({ ...c, collatable: false, nullable: true })) },
    target: { ...target, deferred: [] },
  };
}

function safeMediaName(name: string, path: string) {
  if (typeof name !== 'string' || !name || name !== basename(name) || name.startsWith('.'))
    throw new BackupFileError(`${path} names a media file ${JSON.stringify(name)} outside its folder: refused`);
  return name;
}

/** The SHA-256 (hex) of the file at `path`, or null when there is none. */
async function digestOf(path: string): Promise<string | null> {
  const hash = createHash('sha256');
  try {
    await pipeline(createReadStream(path), hash);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  return hash.digest('hex');
}

/**
 * The backup's media files that `mediaDir` already holds with other content. A restore writes
 * over no file: it refuses these before it changes anything. (A file with the same content is
 * the same file: media files are named by their creation and never change.)
 */
export async function conflictingMedia(mediaDir: string, files: BackupMedia[]): Promise<string[]> {
  const conflicts: string[] = [];
  for (const f of files) {
    const there = await digestOf(join(mediaDir, f.name));
    if (there !== null && there !== f.sha256) conflicts.push(f.name);
  }
  return conflicts;
}

/**
 * Puts the media files a restore loaded into `stagingDir` (all checked by then) into
 * `mediaDir`, each under its name only if no file has it: a hard link where both folders are on
 * one filesystem, else a copy made aside and then linked. A file found there with the same
 * content is left as it is; one with other content (written since `conflictingMedia` looked) is
 * refused, and nothing is ever written over.
 */
export async function placeMedia(stagingDir: string, mediaDir: string, files: BackupMedia[]): Promise<void> {
  await mkdir(mediaDir, { recursive: true });
  for (const f of files) {
    const from = join(stagingDir, f.name);
    const to = join(mediaDir, f.name);
    try {
      await link(from, to).catch(async (e: NodeJS.ErrnoException) => {
        if (e.code !== 'EXDEV') throw e;
        const aside = join(mediaDir, `.${f.name}.${process.pid}.restoring`);
        await copyFile(from, aside, constants.COPYFILE_EXCL);
        await link(aside, to).finally(() => unlink(aside));
      });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      if ((await digestOf(to)) !== f.sha256)
        throw new BackupFileError(`${to} appeared during the restore with other content than the backup's: it was left as it is`);
    }
  }
}
