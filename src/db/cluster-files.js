// Copies of PGlite's cluster files, made synchronously: on the database's own thread (a new data
// directory from the build's snapshot, the copy a backup is made from) and in the CLI, which has
// nothing else to do meanwhile. Some 500 small files: one after the other took as long here as
// all at once through the thread pool (0.55-0.83 s against 0.49-0.90 s for the untrimmed
// snapshot's 1,087, six paired runs on a busy machine), and needs no event loop, which the
// database thread gives to PGlite. Plain JavaScript: that thread loads it without the
// TypeScript loader.
import { copyFileSync, mkdirSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Whether `dir` holds a PostgreSQL cluster. */
export function isClusterSync(dir) {
  try {
    return statSync(join(dir, 'PG_VERSION')).isFile();
  } catch {
    return false;
  }
}

/** The files and directories under `dir`, by their paths relative to it. */
function tree(dir) {
  const entries = readdirSync(dir, { recursive: true, withFileTypes: true });
  const relative = (e) => {
    const parent = e.parentPath.slice(dir.length + 1);
    return parent ? join(parent, e.name) : e.name;
  };
  return {
    dirs: entries.filter((e) => e.isDirectory()).map(relative),
    files: entries.filter((e) => e.isFile()).map(relative),
  };
}

/**
 * Copies the tree `from` into `to` (made if missing). With `manifest` (a file path, outside
 * `to`), it records when the copy began and each file's size and modification time just before
 * it was copied, for `refreshTreeSync` to tell which files changed since.
 */
export function copyTreeSync(from, to, manifest) {
  const since = Date.now();
  const { dirs, files } = tree(from);
  mkdirSync(to, { recursive: true });
  for (const dir of dirs) mkdirSync(join(to, dir), { recursive: true });
  const seen = {};
  for (const file of files) {
    if (manifest) seen[file] = version(join(from, file));
    copyFileSync(join(from, file), join(to, file));
  }
  if (manifest) writeFileSync(manifest, JSON.stringify({ since, files: seen }));
}

/** A file's size and modification time (to the nanosecond the file system keeps), as text. */
function version(path) {
  const stat = statSync(path, { bigint: true, throwIfNoEntry: false });
  return stat ? `${stat.size}:${stat.mtimeNs}` : null;
}

/** How far back a file's modification time is distrusted: file systems keep it coarsely. */
const RACY_MS = 2_000;

/**
 * Brings `to`, a copy made by `copyTreeSync(from, to, manifest)`, up to `from` as it is now:
 * copies again every file whose size or modification time differs from the manifest's, or that
 * was modified less than RACY_MS before the copy began or after (a write within the same tick of
 * the file system's clock would not show), adds new files and removes deleted ones. Run while
 * nothing writes to `from`, `to` is then a copy of that instant; it takes as long as copying the
 * files changed since, not the whole tree.
 */
export function refreshTreeSync(from, to, manifest) {
  const { since, files: seen } = JSON.parse(readFileSync(manifest, 'utf8'));
  const now = tree(from);
  const gone = new Set(tree(to).files);
  for (const dir of now.dirs) mkdirSync(join(to, dir), { recursive: true });
  for (const file of now.files) {
    gone.delete(file);
    const stat = statSync(join(from, file));
    if (seen[file] === version(join(from, file)) && stat.mtimeMs < since - RACY_MS) continue;
    copyFileSync(join(from, file), join(to, file));
  }
  for (const file of gone) rmSync(join(to, file));
}

/**
 * Makes `pgdata` ready for PGlite. A directory PGlite already wrote to is left to it. A new one
 * starts as a copy of `snapshot` (when given and a cluster), which spares PGlite's initdb and the
 * migrations: the copy is made beside it and renamed into place, so an interrupted copy never
 * looks like a cluster. Returns whether the snapshot was used. The caller holds the data
 * directory's lock.
 */
export function prepareFromSnapshot(pgdata, snapshot) {
  let existing = null;
  try {
    existing = readdirSync(pgdata);
  } catch (e) {
    if (e.code !== 'ENOENT') throw e;
  }
  if (existing?.length) return false;
  if (!snapshot || !isClusterSync(snapshot)) {
    mkdirSync(pgdata, { recursive: true });
    return false;
  }
  const partial = `${pgdata}.partial`;
  rmSync(partial, { recursive: true, force: true });
  copyTreeSync(snapshot, partial);
  if (existing) rmdirSync(pgdata);
  renameSync(partial, pgdata);
  return true;
}
