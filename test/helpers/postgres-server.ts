import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll } from 'vitest';
import { freePort, trackChild } from './process.ts';

/**
 * Several instances need one database they can all reach, which embedded PGlite is not. This
 * gives a new database on TEST_DATABASE_URL's server when CI names one, and otherwise on a
 * throwaway PostgreSQL cluster (Debian's `postgresql` package) started for this test file and
 * removed when it ends.
 */
export async function freshPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const serverUrl = process.env.TEST_DATABASE_URL ?? (await throwawayCluster());
  const name = `parley_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

let cluster: Promise<string> | undefined;

function throwawayCluster(): Promise<string> {
  cluster ??= startCluster();
  return cluster;
}

async function startCluster(): Promise<string> {
  const versions = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').sort((a, b) => Number(a) - Number(b)) : [];
  if (versions.length === 0) throw new Error('These tests need PostgreSQL: set TEST_DATABASE_URL, or apt-get install postgresql');
  const bin = `/usr/lib/postgresql/${versions.at(-1)}/bin`;
  const dir = mkdtempSync(join(tmpdir(), 'parley-pg-'));
  chmodSync(dir, 0o777);
  // initdb refuses to run as root; the package's postgres user owns the cluster then.
  const asPostgres = process.getuid?.() === 0 ? (cmd: string, args: string[]) => ['runuser', ['-u', 'postgres', '--', cmd, ...args]] as const : (cmd: string, args: string[]) => [cmd, args] as const;
  const [initCmd, initArgs] = asPostgres(`${bin}/initdb`, ['-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync']);
  execFileSync(initCmd, [...initArgs], { stdio: 'ignore' });
  const port = await freePort();
  const [cmd, args] = asPostgres(`${bin}/postgres`, ['-D', join(dir, 'data'), '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_connections=200']);
  const child = trackChild(spawn(cmd, [...args], { stdio: ['ignore', 'pipe', 'pipe'] }));
  let output = '';
  child.stderr!.on('data', (d) => (output += d));
  child.stdout!.on('data', (d) => (output += d));
  afterAll(() => {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    const c = new pg.Client({ connectionString: url });
    try {
      await c.connect();
      await c.end();
      return url;
    } catch (e) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`PostgreSQL did not start: ${(e as Error).message}\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
