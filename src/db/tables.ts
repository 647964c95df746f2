import type { Sql } from './sql.ts';

/**
 * parley's tables as the database's catalog describes them, for copying rows between databases
 * (backups, `parley db copy`) without a list of tables in the code: whatever tables migrations
 * add later are copied the same way, in an order their foreign keys allow.
 */
export interface Column {
  name: string;
  /** As `format_type` gives it, usable in a cast: `text`, `timestamp(3) without time zone`, `"CreatorType"`. */
  type: string;
  /** Compared by collation: ordered by bytes ("C") so that every server agrees on the order. */
  collatable: boolean;
  nullable: boolean;
}

export interface Table {
  name: string;
  columns: Column[];
  /** The primary key's columns (or a unique key's): rows are read in its order, and a copy resumes after its last value. */
  key: string[];
  /**
   * Foreign-key columns filled in a second pass: those that close a cycle (a table referring to
   * itself, say), since no order of whole rows satisfies them.
   */
  deferred: string[];
}

/** Bookkeeping, not data: the migrations' record (each database keeps its own) and an unfinished copy's marker. */
export const BOOKKEEPING_TABLES = ['_prisma_migrations', '_parley_copy'];

export const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * Settings that decide how values print as text: the same on every connection that reads or
 * writes rows, so the text of a value is the same on either side of a copy.
 */
export const TEXT_SETTINGS = `SET datestyle TO 'ISO, MDY'; SET timezone TO 'UTC'; SET intervalstyle TO 'postgres';
  SET extra_float_digits TO 1; SET bytea_output TO 'hex'`;

/** Embeddings are pgvector's `vector(n)` or `real[]` where pgvector is missing (vector-column.ts). */
export const isEmbedding = (c: Pick<Column, 'type'>) => c.type.startsWith('vector') || c.type === 'real[]';

/** A column as text; embeddings always in pgvector's `[a,b]` form, so both storages read alike. */
export const textOf = (c: Column) => (isEmbedding(c) ? `translate(${ident(c.name)}::text, '{}', '[]')` : `${ident(c.name)}::text`);

/** Text back into a column of `c`'s type (the reverse of `textOf`). */
export const fromText = (text: string, c: Column) =>
  c.type === 'real[]' ? `translate(${text}, '[]', '{}')::real[]` : `(${text})::${c.type}`;

/** A row as one line of JSON: an array of its columns' text (or null). */
export const rowJson = (columns: Column[]) => `json_build_array(${columns.map(textOf).join(', ')})::text`;

const keyOrder = (t: Table, direction = '') =>
  t.key.map((k) => `${ident(k)}${column(t, k).collatable ? ' COLLATE "C"' : ''}${direction}`).join(', ');

export function column(t: Table, name: string): Column {
  const found = t.columns.find((c) => c.name === name);
  if (!found) throw new Error(`table ${t.name} has no column ${name}`);
  return found;
}

interface ForeignKey {
  table: string;
  references: string;
  columns: string[];
}

/**
 * Tables of other schemas that hold data: the job queue's (pg-boss, docs/jobs.md) declared queues,
 * their jobs (waiting, running and kept ones: a job sent for later is work still owed), schedules
 * and subscriptions. Left out are its bookkeeping, which each database keeps for itself or which
 * only lives while instances run: `version` (made by the migration), `instance` (running
 * instances' heartbeats), `bam` (its own maintenance commands), `warning` and `queue_stats`.
 * Named `schema.table` here; `tableRef` quotes them for SQL.
 */
export const OTHER_SCHEMAS: Record<string, string[]> = { pgboss: ['queue', 'job', 'schedule', 'subscription', 'job_dependency'] };

/** A table's name (as `describeTables` gives it) for SQL: `"User"`, `"pgboss"."job"`. */
export function tableRef(name: string): string {
  const dot = name.indexOf('.');
  const schema = name.slice(0, dot);
  return dot > 0 && Object.hasOwn(OTHER_SCHEMAS, schema) ? `${ident(schema)}.${ident(name.slice(dot + 1))}` : ident(name);
}

async function catalog(sql: Sql) {
  // $1: public's tables to leave out; $2: the other schemas' tables to take, as `schema.table`.
  const qualified = (c: string) =>
    `CASE WHEN ${c}.relnamespace = 'public'::regnamespace THEN ${c}.relname ELSE ${c}.relnamespace::regnamespace::text || '.' || ${c}.relname END`;
  const copied = `c.relkind IN ('r', 'p') AND NOT c.relispartition AND CASE WHEN c.relnamespace = 'public'::regnamespace
    THEN c.relname <> ALL ($1::text::text[]) ELSE (${qualified('c')}) = ANY ($2::text::text[]) END`;
  const params = [
    `{${BOOKKEEPING_TABLES.join(',')}}`,
    `{${Object.entries(OTHER_SCHEMAS).flatMap(([schema, tables]) => tables.map((t) => `${schema}.${t}`))}}`,
  ];
  const columns = (await sql.rows(
    `SELECT ${qualified('c')}, a.attname, format_type(a.atttypid, a.atttypmod), (t.typcollation <> 0)::text, (NOT a.attnotnull)::text
     FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_type t ON t.oid = a.atttypid
     WHERE ${copied} AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
     ORDER BY 1, a.attnum`,
    params,
  )) as [string, string, string, string, string][];
  // The primary key, else the first unique index on columns that are never null.
  const keys = (await sql.rows(
    `SELECT DISTINCT ON (1) ${qualified('c')}, (SELECT json_agg(a.attname ORDER BY k.n)::text
       FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n) JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum)
     FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
     WHERE ${copied} AND (i.indisprimary OR (i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
       AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum = ANY (i.indkey) AND NOT a.attnotnull)))
     ORDER BY 1, i.indisprimary DESC, i.indexrelid`,
    params,
  )) as [string, string][];
  // A partition's foreign key is its partitioned table's (pg-boss puts some on a partition only).
  const foreignKeys = (await sql.rows(
    `SELECT DISTINCT ${qualified('c')}, ${qualified('r')}, (SELECT json_agg(a.attname ORDER BY k.n)::text
       FROM unnest(f.conkey) WITH ORDINALITY AS k(attnum, n) JOIN pg_attribute a ON a.attrelid = f.conrelid AND a.attnum = k.attnum)
     FROM pg_constraint f JOIN pg_class c ON c.oid = coalesce(pg_partition_root(f.conrelid), f.conrelid)
       JOIN pg_class r ON r.oid = coalesce(pg_partition_root(f.confrelid), f.confrelid)
     WHERE f.contype = 'f' AND ${copied} ORDER BY 1, 2, 3`,
    params,
  )) as [string, string, string][];
  return { columns, keys, foreignKeys };
}

const names = (json: string) => JSON.parse(json) as string[];

/**
 * The tables of the `public` schema (and `OTHER_SCHEMAS`' that hold data) in an order that satisfies their foreign keys: each after
 * those it refers to. A cycle is broken at a foreign key whose columns may be null (they are
 * `deferred`: copied after every row is in); one with none is an error.
 */
export async function describeTables(sql: Sql): Promise<Table[]> {
  const { columns, keys, foreignKeys } = await catalog(sql);
  const tables = new Map<string, Table>();
  for (const [table, name, type, collatable, nullable] of columns) {
    if (!tables.has(table)) tables.set(table, { name: table, columns: [], key: [], deferred: [] });
    tables.get(table)!.columns.push({ name, type, collatable: collatable === 'true', nullable: nullable === 'true' });
  }
  for (const [table, key] of keys) tables.get(table)!.key = names(key);
  for (const t of tables.values()) {
    if (!t.key.length) throw new Error(`Table ${t.name} has neither a primary key nor a unique key: its rows cannot be copied in order`);
  }
  return order(
    tables,
    foreignKeys.map(([table, references, cols]) => ({ table, references, columns: names(cols) })),
  );
}

function order(tables: Map<string, Table>, foreignKeys: ForeignKey[]): Table[] {
  const nullable = (fk: ForeignKey) => fk.columns.every((c) => column(tables.get(fk.table)!, c).nullable);
  const defer = (fk: ForeignKey) => {
    if (!nullable(fk)) {
      throw new Error(
        `Tables ${fk.table} and ${fk.references} refer to each other through columns that cannot be null: no order copies them`,
      );
    }
    const t = tables.get(fk.table)!;
    t.deferred = [...new Set([...t.deferred, ...fk.columns])];
  };
  let waiting = foreignKeys.filter((fk) => {
    if (fk.table !== fk.references) return true;
    defer(fk);
    return false;
  });
  const placed: Table[] = [];
  const remaining = new Set([...tables.keys()].sort());
  while (remaining.size) {
    const ready = [...remaining].filter((t) => !waiting.some((fk) => fk.table === t && remaining.has(fk.references)));
    if (ready.length) {
      for (const t of ready) {
        remaining.delete(t);
        placed.push(tables.get(t)!);
      }
      continue;
    }
    // A cycle: every remaining table waits on another. Break it at the first nullable key.
    const inCycle = waiting.filter((fk) => remaining.has(fk.table) && remaining.has(fk.references));
    const breakable = inCycle.find(nullable) ?? inCycle[0]!;
    defer(breakable);
    waiting = waiting.filter((fk) => fk !== breakable);
  }
  return placed;
}

/** Row count and a checksum of a table's rows (any order), computed where they are, alike on every server. */
export async function checksum(sql: Sql, t: Table, columns = t.columns): Promise<{ rows: number; checksum: string }> {
  const [[rows, sum]] = (await sql.rows(
    `SELECT count(*)::text, left(md5(count(*)::text || ':' || coalesce(sum(('x' || left(md5(${rowJson(columns)}), 15))::bit(60)::bigint), 0)::text), 16)
     FROM ${tableRef(t.name)}`,
  )) as [[string, string]];
  return { rows: Number(rows), checksum: sum };
}

export async function countRows(sql: Sql, t: Table): Promise<number> {
  const [[rows]] = (await sql.rows(`SELECT count(*)::text FROM ${tableRef(t.name)}`)) as [[string]];
  return Number(rows);
}

/** Rows of `t` after key `after` (all from the start without), in key order, a page at a time. */
export async function* readRows(sql: Sql, t: Table, after: string[] | null, columns = t.columns, pageRows = 500) {
  const keyText = t.key.map((k) => `${ident(k)}::text`).join(', ');
  for (;;) {
    const where = after ? `WHERE (${keyOrder(t)}) > (${t.key.map((k, i) => `$${i + 1}::text::${column(t, k).type}`).join(', ')})` : '';
    const page = (await sql.rows(
      `SELECT ${rowJson(columns)}, ${keyText} FROM ${tableRef(t.name)} ${where} ORDER BY ${keyOrder(t)} LIMIT ${pageRows}`,
      after ?? [],
    )) as string[][];
    if (!page.length) return;
    after = page.at(-1)!.slice(1);
    yield page.map((row) => row[0]!);
    if (page.length < pageRows) return;
  }
}

/** The key of the last row of `t` in key order, or null when it has none. */
export async function lastKey(sql: Sql, t: Table): Promise<string[] | null> {
  const [row] = (await sql.rows(
    `SELECT ${t.key.map((k) => `${ident(k)}::text`).join(', ')} FROM ${tableRef(t.name)} ORDER BY ${keyOrder(t, ' DESC')} LIMIT 1`,
  )) as string[][];
  return row ?? null;
}

/**
 * Inserts rows read by `readRows` from a table with `source`'s columns into the same table
 * described by `target` (columns matched by name; deferred ones left null for `fillDeferred`).
 */
export async function insertRows(sql: Sql, source: Table, target: Table, lines: string[]) {
  const values = source.columns.map((c, i) => (target.deferred.includes(c.name) ? 'NULL' : fromText(`r->>${i}`, column(target, c.name))));
  await sql.rows(
    `INSERT INTO ${tableRef(target.name)} (${source.columns.map((c) => ident(c.name)).join(', ')}) OVERRIDING SYSTEM VALUE
     SELECT ${values.join(', ')} FROM json_array_elements($1::text::json) AS r`,
    [`[${lines.join(',')}]`],
  );
}

/** Fills the deferred columns of rows already inserted, from rows of the key and those columns. */
export async function fillDeferred(sql: Sql, target: Table, lines: string[]) {
  const keys = target.key.map((k, i) => `${ident(k)} = ${fromText(`r->>${i}`, column(target, k))}`);
  const sets = target.deferred.map((d, i) => `${ident(d)} = ${fromText(`r->>${target.key.length + i}`, column(target, d))}`);
  await sql.rows(
    `UPDATE ${tableRef(target.name)} SET ${sets.join(', ')} FROM json_array_elements($1::text::json) AS r WHERE ${keys.join(' AND ')}`,
    [`[${lines.join(',')}]`],
  );
}

/** The columns `fillDeferred` reads: the key, then the deferred ones. */
export const deferredColumns = (t: Table) => [...t.key, ...t.deferred].map((n) => column(t, n));

/** The current value of each sequence of the `public` schema (`serial` columns' counters). */
export async function readSequences(sql: Sql): Promise<{ name: string; value: string; called: boolean }[]> {
  const [[list]] = (await sql.rows(
    `SELECT coalesce(json_agg(relname ORDER BY relname), '[]')::text FROM pg_class WHERE relkind = 'S' AND relnamespace = 'public'::regnamespace`,
  )) as [[string]];
  const sequences = names(list);
  return Promise.all(
    sequences.map(async (name) => {
      const [[value, called]] = (await sql.rows(`SELECT last_value::text, is_called::text FROM ${ident(name)}`)) as [[string, string]];
      return { name, value, called: called === 'true' };
    }),
  );
}

export async function writeSequences(sql: Sql, sequences: { name: string; value: string; called: boolean }[]) {
  for (const s of sequences)
    await sql.rows('SELECT setval($1::text::regclass, $2::text::bigint, $3::text::boolean)', [ident(s.name), s.value, String(s.called)]);
}
