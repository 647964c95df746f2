import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBuilt } from '../scripts/build.mjs';
import { killGroup } from './helpers/servers.ts';

/**
 * Processes the tests start run dist/: bring it up to date once, before any test file runs.
 *
 * Everything the tests make in the system temp folder goes into one folder for this run (the
 * workers inherit TMPDIR), and the servers they start are noted there; the teardown stops those
 * and removes the folder, also after failed or timed-out tests whose workers never cleaned up.
 */
export default async function setup() {
  await ensureBuilt();
  const previous = process.env.TMPDIR;
  const runDir = mkdtempSync(join(tmpdir(), 'parley-test-run-'));
  // PostgreSQL clusters run as the postgres user, inside this folder.
  chmodSync(runDir, 0o755);
  process.env.TMPDIR = runDir;
  process.env.PARLEY_TEST_RUN_DIR = runDir;
  return () => {
    let groups: string[] = [];
    try {
      groups = readFileSync(join(runDir, 'server-groups'), 'utf8').split('\n').filter(Boolean);
    } catch {
      // No server was started.
    }
    for (const pid of groups) killGroup(Number(pid));
    rmSync(runDir, { recursive: true, force: true });
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    delete process.env.PARLEY_TEST_RUN_DIR;
  };
}
