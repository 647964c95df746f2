import { copyFile, mkdir, readdir, rename, rm, rmdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The build (scripts/build.mjs) leaves here a PGlite cluster with every migration applied and no
 * data; running from the TypeScript sources there is none.
 */
export const buildSnapshot = fileURLToPath(new URL('./pgdata-snapshot', import.meta.url));

export const isCluster = (dir: string) =>
  stat(join(dir, 'PG_VERSION')).then(
    () => true,
    () => false,
  );

/** Copies a directory tree, files in parallel: about 1,000 small files, mostly waiting on the disk. */
export async function copyTree(from: string, to: string) {
  const entries = await readdir(from, { recursive: true, withFileTypes: true });
  const path = (e: (typeof entries)[number]) => relative(from, join(e.parentPath, e.name));
  await mkdir(to, { recursive: true });
  for (const dir of entries
    .filter((e) => e.isDirectory())
    .map(path)
    .sort())
    await mkdir(join(to, dir), { recursive: true });
  await Promise.all(entries.filter((e) => e.isFile()).map((e) => copyFile(join(from, path(e)), join(to, path(e)))));
}

/**
 * Makes `pgdata` ready for PGlite. A directory PGlite already wrote to is left to it. A new one
 * starts as a copy of `snapshot` (when given and present), which spares PGlite's initdb and the
 * migrations: the copy is made beside it and renamed into place, so an interrupted copy never
 * looks like a cluster. Returns whether the snapshot was used. The caller holds the data
 * directory's lock.
 */
export async function preparePgdata(pgdata: string, snapshot: string | false): Promise<boolean> {
  const existing = await readdir(pgdata).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return null;
    throw e;
  });
  if (existing?.length) return false;
  if (!snapshot || !(await isCluster(snapshot))) {
    await mkdir(pgdata, { recursive: true });
    return false;
  }
  const partial = `${pgdata}.partial`;
  await rm(partial, { recursive: true, force: true });
  await copyTree(snapshot, partial);
  if (existing) await rmdir(pgdata);
  await rename(partial, pgdata);
  return true;
}
