// The embedded database, run on its own thread. PGlite is PostgreSQL compiled to WebAssembly:
// each statement runs synchronously, so on the main thread it would stall every stream and
// request for its duration. Plain JavaScript: a worker must load without the TypeScript loader.
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import { serveAdapters } from './adapter-host.js';

/** @type {import('@electric-sql/pglite').PGlite} */
let pglite;
try {
  pglite = await PGlite.create(workerData.dataDir ?? 'memory://', { extensions: { vector } });
} catch (e) {
  parentPort.postMessage({ ready: false, error: { name: e.name, message: e.message } });
  process.exit(1);
}
serveAdapters(new PrismaPGlite(pglite), () => pglite.close(), {
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
});
