// The worker side of adapter-thread.ts: answers the driver-adapter calls the main thread
// forwards, for whichever Prisma driver adapter the worker made (PGlite, node-postgres). Plain
// JavaScript: a worker must load without the TypeScript loader.
import { parentPort } from 'node:worker_threads';

/**
 * Errors cross the thread as plain data; a driver-adapter error keeps its structured cause, and
 * a driver's own error its code (ECONNREFUSED, a SQLSTATE): both say whether the database is
 * out of reach (`isDatabaseUnavailable`).
 */
const serialize = (e) => ({
  name: e?.name ?? 'Error',
  message: e?.message ?? String(e),
  code: typeof e?.code === 'string' ? e.code : undefined,
  // PostgreSQL's own detail and hint (a migration that fails says what to do about it).
  detail: e?.detail,
  hint: e?.hint,
  cause: e?.name === 'DriverAdapterError' ? e.cause : undefined,
});

/**
 * Serves `factory`'s adapters and their transactions to the main thread; `close` ends the
 * database, and `extraOps` are calls of this database's own (the embedded one's job queue SQL,
 * plain SQL and file copies); `started` goes with the message that says the worker is ready.
 */
export function serveAdapters(factory, close, extraOps = {}, started = {}) {
  /** Adapters and open transactions by the handles the main thread holds. */
  const handles = new Map();
  let lastHandle = 0;
  const keep = (value) => {
    handles.set(++lastHandle, value);
    return lastHandle;
  };
  const queryable = ({ handle }) => handles.get(handle);
  const connected = (adapter) => ({
    handle: keep(adapter),
    provider: adapter.provider,
    adapterName: adapter.adapterName,
    connectionInfo: adapter.getConnectionInfo?.(),
  });
  const ops = {
    connect: async () => connected(await factory.connect()),
    connectToShadowDb: async () => connected(await factory.connectToShadowDb()),
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
    close,
    ...extraOps,
  };
  parentPort.on('message', async ({ id, op, args }) => {
    try {
      parentPort.postMessage({ id, value: await ops[op](args) });
    } catch (e) {
      parentPort.postMessage({ id, error: serialize(e) });
    }
  });
  parentPort.postMessage({ ...started, ready: true });
}
