// The embedded database, run on its own thread. PGlite is PostgreSQL compiled to WebAssembly:
// each statement runs synchronously, so on the main thread it would stall every stream and
// request for its duration. Plain JavaScript: a worker must load without the TypeScript loader.
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import { serveAdapters } from './adapter-host.js';
import { copyTreeSync, prepareFromSnapshot, refreshTreeSync } from './cluster-files.js';

/** @type {import('@electric-sql/pglite').PGlite} */
let pglite;
let fromSnapshot = false;
try {
  // A new data directory is first copied from the build's snapshot, here rather than on the main
  // thread, which meanwhile loads the service's modules.
  if (workerData.dataDir) fromSnapshot = prepareFromSnapshot(workerData.dataDir, workerData.snapshot ?? false);
  pglite = await PGlite.create(workerData.dataDir ?? 'memory://', { extensions: { vector } });
} catch (e) {
  parentPort.postMessage({ ready: false, error: { name: e.name, message: e.message } });
  process.exit(1);
}
/** Every value as PostgreSQL's text for it, whatever its type (its parsers would make numbers, dates...). */
const asText = Object.fromEntries(Object.keys(pglite.parsers).map((type) => [type, (value) => value]));
/** The plain-SQL transactions the main thread drives (`begin` ... `end`), by handle. */
const transactions = new Map();
let lastTransaction = 0;

serveAdapters(
  new PrismaPGlite(pglite),
  () => pglite.close(),
  {
    // The job queue's statements (pg-boss), on the same connection as Prisma's. PGlite runs each
    // call below only while no interactive transaction of Prisma's holds the connection.
    jobSql: async ({ text, values }) => {
      if (values?.length) return { rows: (await pglite.query(text, values)).rows };
      // Without parameters a call may be several statements, its own BEGIN ... COMMIT among them. Run
      // inside one PGlite transaction, a statement that fails rolls back before anything else runs on
      // the connection; otherwise the failed block would stay open for the next caller's statements.
      // (pg-boss's own BEGIN then only warns, and PGlite's closing COMMIT finds nothing to commit.)
      const results = await pglite.transaction((tx) => tx.exec(text));
      return { rows: results.flatMap((r) => r.rows ?? []) };
    },
    // Plain SQL, for migrations, backups and copies (sql.ts): rows of text values, scripts as written.
    rows: async ({ sql, params }) => (await pglite.query(sql, params, { rowMode: 'array', parsers: asText })).rows,
    exec: async ({ script }) => {
      await pglite.exec(script);
    },
    // A transaction the main thread drives statement by statement. PGlite's transaction() holds
    // its transaction lock until the main thread ends it, and every other statement waits for it.
    begin: () =>
      new Promise((resolve, reject) => {
        const open = {};
        open.settled = pglite.transaction(async (tx) => {
          open.tx = tx;
          const commit = await new Promise((decide) => {
            open.decide = decide;
            transactions.set(++lastTransaction, open);
            resolve(lastTransaction);
          });
          if (!commit) await tx.rollback();
        });
        open.settled.catch(reject);
      }),
    txRows: async ({ handle, sql, params }) =>
      (await transactions.get(handle).tx.query(sql, params, { rowMode: 'array', parsers: asText })).rows,
    txExec: async ({ handle, script }) => {
      await transactions.get(handle).tx.exec(script);
    },
    // The cluster's files as they are now, into `to` (or, with `manifest`, what changed since a copy
    // made there while it ran): called inside a transaction (`begin`), while every other statement
    // waits, it is a copy PGlite opens as if this one had stopped there.
    copyFiles: ({ to, manifest }) => (manifest ? refreshTreeSync(workerData.dataDir, to, manifest) : copyTreeSync(workerData.dataDir, to)),
    end: async ({ handle, commit }) => {
      const open = transactions.get(handle);
      transactions.delete(handle);
      open.decide(commit);
      await open.settled;
    },
  },
  { fromSnapshot },
);
