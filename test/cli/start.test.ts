import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fingerprints } from '../../scripts/build.mjs';
import { runCli, startWithNpm } from '../helpers/process.ts';
import { startFlags } from '../helpers/service-command.ts';

/** The command lines of the processes in a process group, read from /proc. */
function commandsInGroup(group: number) {
  const commands: string[][] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      // The group is the fifth field of stat, counted after the command name's closing parenthesis.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) !== group) continue;
      commands.push(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean));
    } catch {
      // The process ended while being read.
    }
  }
  return commands;
}

/**
 * `npm start` on a data directory that does not exist yet, as on a first run: it runs the build
 * of the current sources, starts from the build's migrated snapshot, and the CLI works on what it
 * left. Always the embedded database (that is what this start path is about), in both lanes.
 */
describe('npm start on a new embedded data directory', () => {
  let dataDir: string;

  beforeAll(async () => {
    dataDir = join(await mkdtemp(join(tmpdir(), 'parley-start-')), 'data');
  });
  afterAll(() => rm(dirname(dataDir), { recursive: true, force: true }));

  it('serves /healthz from dist/ built from the current sources, on a database copied from the migrated snapshot', async () => {
    const server = await startWithNpm({ DATA_DIR: dataDir });
    try {
      await server.waitFor(/parley listening on [^\n]*\n(.*\n)*code: [^\n]+\n/);
      const health = await fetch(`${server.url}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: 'ok', database: 'ok' });
      expect(server.output()).toContain(`database: embedded PGlite in ${dataDir} (new: copied from the migrated snapshot)\n`);
      const { code } = await fingerprints();
      expect(server.output()).toMatch(new RegExp(`\\ncode: dist/ built \\S+ from sources ${code.slice(0, 12)}\\n`));
      // The server npm started runs with the Node flags of the start script (a young generation
      // sized for streaming), which the benchmarks and the other tests' servers are given too.
      expect(startFlags).toContain('--max-semi-space-size=32');
      const node = commandsInGroup(server.child.pid!).find((argv) => argv.includes('bin/parley.js'));
      expect(node).toEqual([expect.stringMatching(/(^|\/)node$/), ...startFlags, 'bin/parley.js', 'serve']);
    } finally {
      server.stop();
    }
    await server.closed;
    expect(server.output()).toContain('SIGTERM received: closing');
  });

  it('leaves a database the CLI from the same build opens as it is, up to date', async () => {
    const migrate = await runCli(['migrate'], { DATA_DIR: dataDir });
    expect(migrate.code, migrate.stderr).toBe(0);
    expect(migrate.stdout).toBe('database is up to date\n');
    const key = await runCli(['keys', 'create', 'erin', '--json'], { DATA_DIR: dataDir });
    expect(key.code, key.stderr).toBe(0);
    expect(JSON.parse(key.stdout)).toMatchObject({ username: 'erin', apiKey: expect.stringMatching(/^pk_/) });
  });
});
