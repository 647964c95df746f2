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
serveAdapters(new PrismaPGlite(pglite), () => pglite.close());
