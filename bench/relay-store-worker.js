// The storing relay's database (bench/relay.ts --store): an embedded PGlite on its own thread, as
// parley runs it, answering one statement per message. Plain JavaScript so that the worker loads
// without the TypeScript loader.
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';

const db = await PGlite.create(workerData.dataDir);
await db.exec(`
  CREATE TABLE IF NOT EXISTS conversation (id text PRIMARY KEY, created timestamptz NOT NULL DEFAULT now());
  CREATE TABLE IF NOT EXISTS message (
    id text PRIMARY KEY,
    conversation text NOT NULL REFERENCES conversation (id),
    role text NOT NULL,
    status text NOT NULL,
    content text NOT NULL,
    created timestamptz NOT NULL DEFAULT now(),
    updated timestamptz NOT NULL DEFAULT now()
  );
  CREATE INDEX IF NOT EXISTS message_conversation ON message (conversation, created);`);
parentPort.on('message', async ({ id, sql, params }) => {
  try {
    await db.query(sql, params);
    parentPort.postMessage({ id });
  } catch (e) {
    parentPort.postMessage({ id, error: String(e) });
  }
});
parentPort.postMessage({ ready: true });
