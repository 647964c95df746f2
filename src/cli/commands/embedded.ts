import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { loadConfig } from '../../config.ts';
import { isRunning } from '../../db/data-dir-lock.ts';
import type { CliIo } from '../io.ts';

/** The configuration of a command that works on the embedded database's data directory. */
export function embeddedConfig(io: CliIo, command: string, otherwise: string) {
  const config = loadConfig(io.env);
  const { database } = config;
  if (database.kind !== 'pglite' || !database.dataDir) {
    throw new Error(`parley ${command} works on the embedded database (DATA_DIR), and DATABASE_URL is set: ${otherwise}`);
  }
  return { config, dataDir: database.dataDir, pgdata: join(database.dataDir, 'pgdata') };
}

/**
 * Removes what an interrupted command left in `dir`: entries named by `pattern`, whose first
 * group is the pid of the process that made them, if that process is gone.
 */
export async function removeLeftovers(dir: string, pattern: RegExp) {
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    const pid = Number(pattern.exec(name)?.[1]);
    if (pid && pid !== process.pid && !isRunning(pid)) await rm(join(dir, name), { recursive: true, force: true });
  }
}
