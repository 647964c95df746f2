// The embedded database, run on its own thread. PGlite is PostgreSQL compiled to WebAssembly:
// each statement runs synchronously, so on the main thread it would stall every stream and
// request for its duration. Here it answers the driver-adapter calls the main thread forwards
// (see pglite-thread.ts). Plain JavaScript: a worker must load without the TypeScript loader.
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import { PrismaPGlite } from 'pglite-prisma-adapter';

/** @type {import('@electric-sql/pglite').PGlite} */
let pglite;
try {
  pglite = await PGlite.create(workerData.dataDir ?? 'memory://', { extensions: { vector } });
} catch (e) {
  parentPort.postMessage({ ready: false, error: { name: e.name, message: e.message } });
  process.exit(1);
}
const factory = new PrismaPGlite(pglite);
/** Adapters and open transactions by the handles the main thread holds. */
const handles = new Map();
let lastHandle = 0;
const keep = (value) => {
  handles.set(++lastHandle, value);
  return lastHandle;
};
const queryable = ({ handle }) => handles.get(handle);

const ops = {
  connect: async () => {
    const adapter = await factory.connect();
    return {
      handle: keep(adapter),
      provider: adapter.provider,
      adapterName: adapter.adapterName,
      connectionInfo: adapter.getConnectionInfo?.(),
    };
  },
  connectToShadowDb: async () => {
    const adapter = await factory.connectToShadowDb();
    return {
      handle: keep(adapter),
      provider: adapter.provider,
      adapterName: adapter.adapterName,
      connectionInfo: adapter.getConnectionInfo?.(),
    };
  },
  queryRaw: (args) => queryable(args).queryRaw(args.query),
  executeRaw: (args) => queryable(args).executeRaw(args.query),
  executeScript: (args) => queryable(args).executeScript(args.script),
  startTransaction: async (args) => {
    const tx = await queryable(args).startTransaction(args.isolationLevel);
    return { handle: keep(tx), options: tx.options };
  },
  commit: (args) => {
    const tx = queryable(args);
    handles.delete(args.handle);
    return tx.commit();
  },
  rollback: (args) => {
    const tx = queryable(args);
    handles.delete(args.handle);
    return tx.rollback();
  },
  dispose: async (args) => {
    await queryable(args).dispose();
    handles.delete(args.handle);
  },
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
  close: () => pglite.close(),
};

/** Errors cross the thread as plain data; a driver-adapter error keeps its structured cause. */
const serialize = (e) => ({
  name: e?.name ?? 'Error',
  message: e?.message ?? String(e),
  cause: e?.name === 'DriverAdapterError' ? e.cause : undefined,
});

parentPort.on('message', async ({ id, op, args }) => {
  try {
    parentPort.postMessage({ id, value: await ops[op](args) });
  } catch (e) {
    parentPort.postMessage({ id, error: serialize(e) });
  }
});
parentPort.postMessage({ ready: true });
