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

const early = new Map<string, Promise<EmbeddedStart>>();

/**
 * Starts the embedded database of `dataDir` at once, for the service's `openDatabase` to take
 * over: the files of a new data directory are copied, and PGlite starts, on its thread, while
 * the main thread is still loading the service's modules (a second or more of each, one after
 * the other otherwise). This module imports nothing heavy, so it can run before them.
 */
export function startEarly(dataDir: string) {
  const started = start(dataDir, buildSnapshot);
  // Reported by the open that takes it over.
  started.catch(() => {});
  early.set(resolve(dataDir), started);
}

/** Starts the embedded database of `dataDir`, or takes over the one `startEarly` started. */
export function startEmbedded(dataDir: string, snapshot: string | false): Promise<EmbeddedStart> {
  const started = early.get(resolve(dataDir));
  if (started && snapshot === buildSnapshot) {
    early.delete(resolve(dataDir));
    return started;
  }
  return start(dataDir, snapshot);
}
