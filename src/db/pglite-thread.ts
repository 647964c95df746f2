import { plainSql, startAdapterThread } from './adapter-thread.ts';
import type { SqlDatabase } from './sql.ts';

/**
 * The embedded database (PGlite) on a worker thread (`adapter-thread.ts`), with what only it
 * offers beside Prisma's adapter: plain SQL (migrations, backups, copies) and a copy of its
 * files. A new (empty or missing) `dataDir` is first made a copy of `options.snapshot` on that
 * thread (cluster-files.js); `ready` says whether it was.
 */
export function startPGliteThread(dataDir: string | undefined, options: { snapshot?: string | false } = {}) {
  const thread = startAdapterThread(
    new URL('./pglite-worker.js', import.meta.url),
    { dataDir, snapshot: options.snapshot ?? false },
    'pglite-prisma-adapter',
  );
  const ready = thread.ready.then((m) => ({ fromSnapshot: Boolean(m.fromSnapshot) }));
  // As the thread's own `ready`: reported to whoever awaits it, never unhandled meanwhile.
  ready.catch(() => {});
  return {
    ...thread,
    ready,
    sql: plainSql(thread.channel),
    /**
     * Copies the cluster's files into `dir` (or, with `manifest`, brings a copy made there while
     * the database ran up to now: cluster-files.js); inside `sql.transaction`, a copy of one instant.
     */
    copyFiles: (dir: string, manifest?: string) => thread.channel.call<void>('copyFiles', { to: dir, manifest }),
  };
}

/**
 * Runs `work` on the embedded database in `dataDir` (a thread of its own; a new one copied from
 * `snapshot` if given), and stops it after.
 */
export async function withPGlite<T>(
  dataDir: string,
  work: (sql: SqlDatabase, started: { fromSnapshot: boolean }) => Promise<T>,
  snapshot: string | false = false,
): Promise<T> {
  const database = startPGliteThread(dataDir, { snapshot });
  try {
    return await work(database.sql, await database.ready);
  } finally {
    await database.ready.then(database.close, database.stop);
  }
}
