import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export const isRunning = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** The pid of the live process that holds the data directory, or null when none does. */
export async function liveLockHolder(dir: string): Promise<number | null> {
  const holder = Number((await readFile(join(dir, 'parley.pid'), 'utf8').catch(() => '')).trim());
  return holder && holder !== process.pid && isRunning(holder) ? holder : null;
}

/**
 * PGlite is an in-process database: two processes on one data directory would not see each
 * other's writes and could corrupt it. The first process to open the directory holds it
 * (a pid file); a lock left by a process that no longer runs is taken over.
 */
export async function lockDataDir(dir: string): Promise<() => Promise<void>> {
  const path = join(dir, 'parley.pid');
  try {
    await writeFile(path, String(process.pid), { flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    const holder = Number((await readFile(path, 'utf8')).trim());
    if (holder && holder !== process.pid && isRunning(holder)) {
      throw new Error(
        `The embedded database in ${dir} is in use by another parley process (pid ${holder}). ` +
          'Stop it first, or set DATABASE_URL to a PostgreSQL server that several processes can share.',
      );
    }
    await writeFile(path, String(process.pid));
  }
  return () => rm(path, { force: true });
}
