// A PostgreSQL server's connections, held on their own thread: node-postgres parses every row
// of every result, and the adapter converts it, which on the main thread would come between the
// tokens of every reply being streamed. Plain JavaScript: a worker must load without the
// TypeScript loader.
import { workerData } from 'node:worker_threads';
import { PrismaPg } from '@prisma/adapter-pg';
import { serveAdapters } from './adapter-host.js';

// Prisma disposes the adapter it connected (ending its pool) when the client disconnects; the
// thread is then ended from outside.
serveAdapters(new PrismaPg({ connectionString: workerData.url, connectionTimeoutMillis: workerData.connectTimeoutMs }), async () => {});
