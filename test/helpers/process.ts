import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { Writable } from 'node:stream';
import { join } from 'node:path';
import { freshDatabase } from './database.ts';
import { freePort } from './servers.ts';
import { parleyBin, root, serveArgs } from './service-command.ts';

/**
 * Every child a test starts is killed when its file ends (`test/helpers/each-file.ts`), and when
 * the worker exits, also after a failed or timed-out test: no server outlives the test that
 * started it.
 */
const children = new Set<ChildProcess>();
export const trackChild = <C extends ChildProcess>(child: C): C => {
  children.add(child);
  child.on('exit', () => children.delete(child));
  return child;
};
export const killChildren = () => {
  for (const child of children) {
    // A child started in its own process group (npm and what it runs) goes with the whole group.
    if (child.spawnargs[0] === 'npm') signalGroup(child, 'SIGKILL');
    else child.kill('SIGKILL');
  }
};
const signalGroup = (child: ChildProcess, signal: NodeJS.Signals) => {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // The group has already gone.
  }
};
process.on('exit', killChildren);

/** Environment for child processes over a fresh database: a PGlite data dir, or a new PostgreSQL database. */
export async function freshDatabaseEnv(): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  const db = await freshDatabase();
  if (db.config.kind === 'postgres') return { env: { DATABASE_URL: db.config.url }, drop: db.drop };
  return { env: { DATA_DIR: await mkdtemp(join(tmpdir(), 'parley-data-')) }, drop: db.drop };
}

const childEnv = (env: Record<string, string>) => {
  const { DATABASE_URL: _url, DATA_DIR: _dir, PORT: _port, ...rest } = process.env;
  // Tool services and receivers of tests listen on loopback, over http: allowed as an operator
  // allows them for tests (docs/outbound.md), unless a test says otherwise.
  return { ...rest, LOG_LEVEL: 'info', OUTBOUND_ALLOW_HTTP: 'true', OUTBOUND_ALLOW_PRIVATE: 'true', ...env };
};

/** A stream that keeps what is written to it. */
class Kept extends Writable {
  text = '';
  override _write(chunk: Buffer, _encoding: string, done: () => void) {
    this.text += chunk;
    done();
  }
}

/**
 * Runs a CLI command as the function it is, in this process, with its own settings and output:
 * what `parley <args>` prints and the code it exits with, without a process's start-up (seconds
 * on a busy machine). Two commands that must meet as processes (one holding the data directory
 * while another starts) use `runCliProcess`.
 */
export async function runCli(args: string[], env: Record<string, string>) {
  // The build, as `npx parley` runs it: the same code as the servers the tests start, and its
  // migrated snapshot, which new data directories are copied from.
  const { main } = (await import(`${root}dist/cli/main.js`)) as typeof import('../../src/cli/main.ts');
  const [stdout, stderr] = [new Kept(), new Kept()];
  const code = await main(args, { env: childEnv(env), stdout, stderr });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** `parley <args>` as a process of its own, as a person runs it. */
export async function runCliProcess(args: string[], env: Record<string, string>) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = trackChild(spawn(process.execPath, [parleyBin, ...args], { cwd: root, env: childEnv(env) }));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  output(): string;
  /** Waits for `pattern` in the output, looking only past character `since` if given. */
  waitFor(pattern: RegExp, options?: { since?: number; timeoutMs?: number }): Promise<void>;
  exited: Promise<number | null>;
}

/**
 * Starts the service the way `npm start` does: `node <flags> bin/parley.js serve`, with the flags
 * of the start script. It runs the build in dist/ (test/global-setup.ts brings it up to date
 * before any test; test/cli/start.test.ts checks what `npm start` runs).
 */
export async function startServerProcess(env: Record<string, string>): Promise<ServerProcess> {
  const port = await freePort();
  const child = trackChild(
    spawn(process.execPath, serveArgs(), {
      cwd: root,
      env: childEnv({ PORT: String(port), HOST: '127.0.0.1', ...env }),
    }),
  );
  return { url: `http://127.0.0.1:${port}`, ...watch(child) };
}

/**
 * Runs `npm start` itself, in its own process group: `stop` sends SIGTERM to npm, its shell and
 * the server together, as Ctrl-C in a terminal would.
 */
export async function startWithNpm(env: Record<string, string>): Promise<ServerProcess & { stop(): void; closed: Promise<void> }> {
  const port = await freePort();
  const child = trackChild(
    spawn('npm', ['start', '--silent'], { cwd: root, detached: true, env: childEnv({ PORT: String(port), HOST: '127.0.0.1', ...env }) }),
  );
  // npm exits on the signal at once; its output ends when the server it started has gone too.
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  return { url: `http://127.0.0.1:${port}`, ...watch(child), stop: () => signalGroup(child, 'SIGTERM'), closed };
}

/** Starts a CLI command and lets the test watch its output (and kill it) while it runs. */
export function startCliProcess(args: string[], env: Record<string, string>): Omit<ServerProcess, 'url'> {
  return watch(trackChild(spawn(process.execPath, [parleyBin, ...args], { cwd: root, env: childEnv(env) })));
}

function watch(child: ChildProcess): Omit<ServerProcess, 'url'> {
  let out = '';
  const listeners = new Set<() => void>();
  const append = (d: Buffer) => {
    out += d;
    for (const l of listeners) l();
  };
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

  const waitFor = (pattern: RegExp, { since = 0, timeoutMs = 60_000 } = {}) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (pattern.test(out.slice(since))) {
          listeners.delete(check);
          clearTimeout(timer);
          resolve();
        }
      };
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`timed out waiting for ${pattern}; output so far:\n${out}`));
      }, timeoutMs);
      listeners.add(check);
      void exited.then(() => setTimeout(() => reject(new Error(`process exited before ${pattern}; output:\n${out}`)), 50));
      check();
    });

  return { child, output: () => out, waitFor, exited };
}
