import pg from 'pg';

/**
 * What migrations, backups and copies need of a database, below Prisma: statements with text
 * parameters giving rows of values, and scripts run as written (several statements, `DO` blocks).
 */
export interface Sql {
  rows(sql: string, params?: (string | null)[]): Promise<unknown[][]>;
  exec(script: string): Promise<void>;
}

export interface SqlDatabase extends Sql {
  /**
   * Runs `work` in one transaction that no other statement on this database joins: on the
   * embedded database every other statement waits until it ends. Rolled back if `work` throws.
   */
  transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T>;
}

/** A PostgreSQL error's message with what the server adds to explain it. */
export function describeSqlError(e: unknown): string {
  const { message, detail, hint } = e as { message?: string; detail?: string; hint?: string };
  return [message ?? String(e), detail && `Detail: ${detail}`, hint && `Hint: ${hint}`].filter(Boolean).join('\n');
}

/** Where a PostgreSQL URL points, without its credentials (for messages and logs). */
export function describePostgresUrl(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || 5432}${u.pathname}`;
}

/** One connection to PostgreSQL. Values come back as PostgreSQL's text, unparsed. */
export async function connectPostgres(url: string, connectTimeoutMs = 5_000): Promise<SqlDatabase & { close(): Promise<void> }> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: connectTimeoutMs,
    types: { getTypeParser: () => (v: string) => v },
  });
  // A connection that breaks while idle must not take the process down with an unhandled error.
  client.on('error', () => {});
  await client.connect();
  // One statement at a time: callers may ask for several at once (Promise.all), one connection runs them in turn.
  let last: Promise<unknown> = Promise.resolve();
  const inTurn = <T>(work: () => Promise<T>): Promise<T> => {
    const next = last.then(work);
    last = next.catch(() => {});
    return next;
  };
  const sql: Sql = {
    rows: (text, params = []) => inTurn(async () => (await client.query({ text, values: params, rowMode: 'array' })).rows),
    // Without parameters node-postgres sends the simple query protocol, which runs a whole script.
    exec: (script) =>
      inTurn(async () => {
        await client.query(script);
      }),
  };
  let inTransaction = false;
  return {
    ...sql,
    async transaction(work) {
      if (inTransaction) throw new Error('a transaction is already open on this connection');
      inTransaction = true;
      try {
        await sql.exec('BEGIN');
        try {
          const result = await work(sql);
          await sql.exec('COMMIT');
          return result;
        } catch (e) {
          await sql.exec('ROLLBACK').catch(() => {});
          throw e;
        }
      } finally {
        inTransaction = false;
      }
    },
    close: () => client.end().catch(() => {}),
  };
}
