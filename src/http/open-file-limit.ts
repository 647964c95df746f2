import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * The process's soft limit on open files (RLIMIT_NOFILE), or null when it cannot be read.
 * Node has no getrlimit: Linux shows it in /proc, elsewhere a shell (which inherits our
 * limits) prints it.
 */
export function openFileLimit(): number | null {
  try {
    const line = /^Max open files\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (line) return parseLimit(line[1]!);
  } catch {
    // not Linux: ask the shell
  }
  try {
    return parseLimit(execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8', timeout: 2_000 }).trim());
  } catch {
    return null;
  }
}

const parseLimit = (value: string) => (value === 'unlimited' ? Number.POSITIVE_INFINITY : /^\d+$/.test(value) ? Number(value) : null);

/** Assumed when the limit cannot be read: the usual default soft limit. */
const ASSUMED_LIMIT = 1024;
/** Beyond any count a single process should hold open, even without a limit. */
const CEILING = 65_536;

/**
 * How many client connections to accept: the open-file limit less headroom for what else
 * needs descriptors (database connections, PGlite's files, static files, logs), so a flood of
 * connections is refused before the process runs out and cannot open anything else.
 */
export function connectionCap(limit: number | null): number {
  const files = Math.min(limit ?? ASSUMED_LIMIT, CEILING);
  const headroom = Math.max(256, Math.ceil(files * 0.2));
  return Math.max(16, files - headroom);
}
