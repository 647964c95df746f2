import { applyMigrations, type Migration } from './migrate.ts';
import { connectPostgres, describePostgresUrl, type Sql, type SqlDatabase } from './sql.ts';
import {
  checksum,
  countRows,
  deferredColumns,
  describeTables,
  fillDeferred,
  ident,
  tableRef,
  insertRows,
  isEmbedding,
  lastKey,
  readRows,
  readSequences,
  TEXT_SETTINGS,
  type Table,
  writeSequences,
} from './tables.ts';

/**
 * `parley db copy`: every row of the embedded database into a PostgreSQL database, table by table
 * in an order their foreign keys allow (tables.ts reads them from the catalog: tables later
 * migrations add are copied alike). Rows go in key order, a page per statement, so a copy that
 * was interrupted holds whole pages of a prefix of the tables; run again, it goes on after the
 * last key each table holds. A marker table on the target says a copy is under way, and from where.
 */

/** Said before anything changed on either side. */
export class CopyRefused extends Error {}

const MARKER = '_parley_copy';

export interface CopyOptions {
  /** Replace what the target holds (refused otherwise when it has parley data). */
  force?: boolean;
  /** Accept a server without pgvector: embeddings go to `real[]`. */
  withoutPgvector?: boolean;
  /** The migrations both sides are brought to (default prisma/migrations). */
  migrations?: Migration[];
  /** Rows per statement (default 500): each is committed on its own, and a rerun goes on after the last. */
  pageRows?: number;
  onProgress?(done: number, total: number): void;
  onNotice?(line: string): void;
}

export interface TableReport {
  name: string;
  source: { rows: number; checksum: string };
  target: { rows: number; checksum: string };
}

export interface CopyReport {
  tables: TableReport[];
  resumed: boolean;
  /** How the target stores embeddings: `vector(768)`, or `real[]` without pgvector. */
  embeddings: string[];
}

async function connect(url: string) {
  try {
    return await connectPostgres(url);
  } catch (e) {
    const { code, message } = e as { code?: string; message: string };
    const where = `PostgreSQL at ${describePostgresUrl(url)}`;
    if (code === '28P01' || code === '28000') throw new CopyRefused(`${where} refused the login: ${message}. Nothing was changed.`);
    if (code === '3D000')
      throw new CopyRefused(`${where}: ${message}. Create it first (createdb, or CREATE DATABASE). Nothing was changed.`);
    throw new CopyRefused(`Cannot reach ${where}: ${message}. Nothing was changed.`);
  }
}

interface TargetState {
  /** The source of a copy under way (its marker), if any. */
  copying: string | null;
  /** Source tables that exist on the target and hold rows. */
  holding: string[];
}

/** What may be done on the target, and what it holds: checked before anything is changed. */
async function inspect(target: Sql, tables: Table[], url: string, options: CopyOptions): Promise<TargetState> {
  const where = `PostgreSQL at ${describePostgresUrl(url)}`;
  const [[user, database, superuser, mayCreate, vector, available, trusted]] = (await target.rows(
    `SELECT current_user, current_database(), (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)::text,
       coalesce((SELECT has_schema_privilege(oid, 'CREATE') FROM pg_namespace WHERE nspname = 'public'), has_database_privilege(current_database(), 'CREATE'))::text,
       (SELECT extversion FROM pg_extension WHERE extname = 'vector'),
       EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')::text,
       coalesce((SELECT bool_or(trusted) FROM pg_available_extension_versions WHERE name = 'vector'), false)::text`,
  )) as [[string, string, string, string, string | null, string, string]];
  const nothing = 'Nothing was changed.';
  if (mayCreate !== 'true') {
    throw new CopyRefused(
      `User ${user} may not create tables in schema public of database ${database} (${where}). As its owner or a superuser: ` +
        `GRANT CREATE ON SCHEMA public TO ${ident(user)}; or copy with the owner's URL. ${nothing}`,
    );
  }
  if (!vector && available === 'true' && superuser !== 'true' && trusted !== 'true') {
    throw new CopyRefused(
      `pgvector is installed on ${where}, but user ${user} may not enable it. As a superuser, run CREATE EXTENSION vector; in database ${database}, then run this again. ${nothing}`,
    );
  }
  if (!vector && available !== 'true' && !options.withoutPgvector) {
    throw new CopyRefused(
      `${where} has no pgvector. Install it on the server (Debian: apt-get install postgresql-<version>-pgvector) and run this again; ` +
        `or run again with --without-pgvector to keep embeddings as real[] (search then scans every creation: docs/operations.md). ${nothing}`,
    );
  }
  const [[marker]] = (await target.rows(`SELECT to_regclass('${ident(MARKER)}')::text`)) as [[string | null]];
  const copying = marker ? (((await target.rows(`SELECT source FROM ${ident(MARKER)} LIMIT 1`)) as [[string]] | [])[0]?.[0] ?? null) : null;
  const holding: string[] = [];
  for (const t of tables) {
    const [[exists]] = (await target.rows(`SELECT to_regclass($1)::text`, [tableRef(t.name)])) as [[string | null]];
    if (!exists) continue;
    const privileges = options.force ? 'SELECT,INSERT,UPDATE,TRUNCATE' : 'SELECT,INSERT,UPDATE';
    // has_table_privilege with a list says whether any of them is held: each one is asked alone.
    const [[missing]] = (await target.rows(
      `SELECT string_agg(p, ', ') FROM unnest(string_to_array($2, ',')) AS p WHERE NOT has_table_privilege($1, p)`,
      [tableRef(t.name), privileges],
    )) as [[string | null]];
    if (missing) throw new CopyRefused(`User ${user} lacks ${missing} on table ${t.name} of ${where}. ${nothing}`);
    if (((await target.rows(`SELECT 1 FROM ${tableRef(t.name)} LIMIT 1`)) as unknown[]).length) holding.push(t.name);
  }
  return { copying, holding };
}

/** The target's tables, which must be the source's with the same columns (embeddings stored either way). */
function matchTables(source: Table[], target: Table[], url: string): Map<string, Table> {
  const byName = new Map(target.map((t) => [t.name, t]));
  const shape = (t: Table) =>
    t.columns
      .map((c) => `${c.name} ${isEmbedding(c) ? 'embedding' : c.type}`)
      .sort()
      .join(', ');
  for (const t of source) {
    const other = byName.get(t.name);
    if (!other || shape(other) !== shape(t)) {
      throw new Error(
        `Table ${t.name} on PostgreSQL at ${describePostgresUrl(url)} is not the embedded database's (${other ? shape(other) : 'missing'}; embedded: ${shape(t)}) although both are migrated alike`,
      );
    }
  }
  return byName;
}

async function copyRows(source: Sql, target: Sql, tables: { from: Table; to: Table }[], total: number, options: CopyOptions) {
  let done = 0;
  for (const { from, to } of tables) {
    const after = await lastKey(target, to);
    if (after) done += await countRows(target, to);
    options.onProgress?.(done, total);
    for await (const page of readRows(source, from, after, from.columns, options.pageRows)) {
      await insertRows(target, from, to, page);
      options.onProgress?.((done += page.length), total);
    }
  }
  for (const { from, to } of tables.filter((t) => t.to.deferred.length)) {
    for await (const page of readRows(source, from, null, deferredColumns(from), options.pageRows)) await fillDeferred(target, to, page);
  }
  await writeSequences(target, await readSequences(source));
}

/**
 * Copies every row of `source` (the embedded database, which must not change meanwhile) into
 * the PostgreSQL database at `url`, both migrated first. `sourceId` names the source in the
 * marker, so that a rerun resumes only a copy from the same place.
 */
export async function copyToPostgres(source: SqlDatabase, sourceId: string, url: string, options: CopyOptions = {}): Promise<CopyReport> {
  await source.exec(TEXT_SETTINGS);
  const target = await connect(url);
  try {
    await target.exec(TEXT_SETTINGS);
    const state = await inspect(target, await describeTables(source), url, options);
    const resumed = state.copying === sourceId && !options.force;
    if (state.holding.length && !resumed && !options.force) {
      throw new CopyRefused(
        `PostgreSQL at ${describePostgresUrl(url)} holds parley data (${state.holding.join(', ')})` +
          `${state.copying ? `, from an unfinished copy of ${state.copying}` : ''}: refusing to overwrite it. ` +
          'Run again with --force to replace it with the embedded database. Nothing was changed.',
      );
    }
    if (resumed) options.onNotice?.(`Resuming the unfinished copy of ${sourceId}: tables go on after the rows already copied.`);
    await applyMigrations(source, { migrations: options.migrations });
    await applyMigrations(target, { migrations: options.migrations });
    const tables = await describeTables(source);
    const byName = matchTables(tables, await describeTables(target), url);
    const pairs = tables.map((from) => ({ from, to: { ...byName.get(from.name)!, deferred: from.deferred } }));
    await target.transaction(async (tx) => {
      if (options.force) await tx.exec(`TRUNCATE ${tables.map((t) => tableRef(t.name)).join(', ')} RESTART IDENTITY`);
      await tx.exec(`CREATE TABLE IF NOT EXISTS ${ident(MARKER)} (source text NOT NULL, "startedAt" timestamptz NOT NULL DEFAULT now())`);
      if (resumed) return;
      await tx.exec(`DELETE FROM ${ident(MARKER)}`);
      await tx.rows(`INSERT INTO ${ident(MARKER)} (source) VALUES ($1)`, [sourceId]);
    });
    const sums = await Promise.all(tables.map((t) => checksum(source, t)));
    await copyRows(
      source,
      target,
      pairs,
      sums.reduce((n, s) => n + s.rows, 0),
      options,
    );
    const report = await Promise.all(
      pairs.map(async ({ from, to }, i) => ({ name: from.name, source: sums[i]!, target: await checksum(target, to) })),
    );
    if (report.every((r) => r.source.rows === r.target.rows && r.source.checksum === r.target.checksum)) {
      await target.exec(`DROP TABLE ${ident(MARKER)}`);
    }
    const stored = pairs.flatMap(({ to }) => to.columns.filter(isEmbedding).map((c) => c.type));
    return { tables: report, resumed, embeddings: [...new Set(stored)] };
  } finally {
    await target.close();
  }
}
