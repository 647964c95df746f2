import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { lockDataDir } from './data-dir-lock.ts';
import { startPGliteThread } from './pglite-thread.ts';
import { buildSnapshot } from './snapshot.ts';

/**
 * The embedded database of a data directory, started: held (locked), PGlite starting on its
 * thread (which first copies the build's migrated snapshot into a new data directory).
 */
export interface EmbeddedStart {
  pgdata: string;
  pglite: ReturnType<typeof startPGliteThread>;
  unlock(): Promise<void>;
}

async function start(dataDir: string, snapshot: string | false): Promise<EmbeddedStart> {
  // DATA_DIR holds the lock file and, in pgdata/, PGlite's own files (it wants a directory to
  // itself). Owner-only: it holds the database files and the service's command socket.
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const unlock = await lockDataDir(dataDir);
  const pgdata = join(dataDir, 'pgdata');
  return { pgdata, pglite: startPGliteThread(pgdata, { snapshot }), unlock };
}

const early = new Map<string, { snapshot: string | false; started: Promise<EmbeddedStart> }>();

/**
 * Starts the embedded database of `dataDir` at once, for the service's `openDatabase` to take
 * over: the files of a new data directory are copied, and PGlite starts, on its thread, while
 * the main thread is still loading the service's modules (a second or more of each, one after
 * the other otherwise). This module imports nothing heavy, so it can run before them.
 *
 * Resolves once the thread runs (the directory made and held), long before PGlite is ready. The
 * caller waits for that before it imports the service: on Node 22 and later an `import()` of
 * the service's modules holds the event loop until all of them are loaded, so a thread whose
 * start still waited on the directory's lock would only start after them.
 */
export async function startEarly(dataDir: string, snapshot: string | false = buildSnapshot): Promise<void> {
  const started = start(dataDir, snapshot);
  early.set(resolve(dataDir), { snapshot, started });
  // A start that failed (the directory held by another process) is reported by the open that takes it over.
  await started.then(
    () => {},
    () => {},
  );
}

/** Starts the embedded database of `dataDir`, or takes over the one `startEarly` started. */
export function startEmbedded(dataDir: string, snapshot: string | false): Promise<EmbeddedStart> {
  const taken = early.get(resolve(dataDir));
  if (taken && taken.snapshot === snapshot) {
    early.delete(resolve(dataDir));
    return taken.started;
  }
  return start(dataDir, snapshot);
}
