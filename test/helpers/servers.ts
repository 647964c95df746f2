import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/**
 * Throwaway database servers from Debian's packages, on free loopback ports, for tests and
 * benchmarks that need what embedded PGlite cannot give (several processes on one database,
 * Redis). Callers stop what they start; the test suite's teardown stops what they could not.
 */
export interface ThrowawayServer {
  url: string;
  child: ChildProcess;
  stop(): void;
}

/** A port on 127.0.0.1 that nothing listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * The environment without a clock shift (the suite may run under faketime: .ci/run, and
 * scripts/suite-proofs.sh): for the servers from Debian that need the true clock (libfaketime
 * hangs redis-server and Chromium) and whose clock the service never compares with its own.
 * PostgreSQL keeps the shift: the service's statements compare its now() with their times.
 */
export function trueClockEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of Object.keys(env)) if (name === 'LD_PRELOAD' || name.startsWith('FAKETIME')) delete env[name];
  return env;
}

/**
 * A server runs in a process group of its own (PostgreSQL under `runuser` would outlive a killed
 * `runuser`), noted in the test run's folder so that the suite's teardown stops it even when the
 * worker that started it was killed (a timeout) before it could.
 */
function spawnServer(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true, env });
  const runDir = process.env.PARLEY_TEST_RUN_DIR;
  if (runDir && child.pid) appendFileSync(join(runDir, 'server-groups'), `${child.pid}\n`);
  return child;
}

/** Stops a server started by `spawnServer`, with everything it started. */
export function killGroup(pid: number | undefined) {
  if (!pid) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}

function collect(child: ChildProcess) {
  let output = '';
  child.stdout?.on('data', (d) => (output += d));
  child.stderr?.on('data', (d) => (output += d));
  return () => output;
}

/** A redis-server with no persistence (`apt-get install redis-server`); on `port` to start one again where it was. */
export async function startRedisServer(port?: number): Promise<ThrowawayServer> {
  port ??= await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'parley-redis-'));
  const child = spawnServer(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    trueClockEnv(),
  );
  const output = collect(child);
  const stop = () => {
    killGroup(child.pid);
    rmSync(dir, { recursive: true, force: true });
  };
  await new Promise<void>((resolve, reject) => {
    child.on('error', (e) => reject(new Error(`redis-server could not start (apt-get install redis-server): ${e.message}`)));
    child.on('exit', (code) => reject(new Error(`redis-server exited with ${code}:\n${output()}`)));
    const check = () => (/ready to accept connections/i.test(output()) ? resolve() : setTimeout(check, 20));
    check();
  }).catch((e) => {
    stop();
    throw e;
  });
  return { url: `redis://127.0.0.1:${port}`, child, stop };
}

/** A PostgreSQL cluster made for the occasion (`apt-get install postgresql`), without fsync. */
export async function startPostgresCluster(): Promise<ThrowawayServer> {
  const versions = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').sort((a, b) => Number(a) - Number(b)) : [];
  if (versions.length === 0) throw new Error('PostgreSQL is needed here: set TEST_DATABASE_URL, or apt-get install postgresql');
  const bin = `/usr/lib/postgresql/${versions.at(-1)}/bin`;
  const dir = mkdtempSync(join(tmpdir(), 'parley-pg-'));
  chmodSync(dir, 0o777);
  // initdb refuses to run as root; the package's postgres user owns the cluster then.
  const command = (cmd: string, args: string[]): [string, string[]] =>
    process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
  execFileSync(...command(`${bin}/initdb`, ['-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync']), { stdio: 'ignore' });
  const port = await freePort();
  const child = spawnServer(
    ...command(`${bin}/postgres`, [
      '-D',
      join(dir, 'data'),
      '-p',
      String(port),
      '-k',
      dir,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'fsync=off',
      '-c',
      'max_connections=300',
    ]),
  );
  const output = collect(child);
  const stop = () => {
    killGroup(child.pid);
    rmSync(dir, { recursive: true, force: true });
  };
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    const c = new pg.Client({ connectionString: url });
    try {
      await c.connect();
      await c.end();
      return { url, child, stop };
    } catch (e) {
      if (Date.now() > deadline || child.exitCode !== null) {
        stop();
        throw new Error(`PostgreSQL did not start: ${(e as Error).message}\n${output()}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
