import { spawn } from 'node:child_process';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type ServerProcess, startServerProcess } from '../helpers/process.ts';

/**
 * The CLI's writing commands while the service runs on the embedded database: the service holds
 * PGlite, so the CLI asks it over the Unix socket in the data directory. Real processes: the
 * server as `npm start` runs it, each CLI command as a user types it in a second terminal.
 */
/**
 * What `nobody` gets when connecting to `socket`: a Node process run as that user. The test's own
 * Node may sit where `nobody` cannot run it (a per-user install), so the system's is tried too.
 */
async function connectAsNobody(socket: string): Promise<string> {
  const attempt = `require('node:net').connect(process.argv[1]).on('connect', () => { console.log('connected'); process.exit(0) }).on('error', (e) => { console.log(e.code); process.exit(0) })`;
  for (const node of [process.execPath, '/usr/bin/node', '/usr/local/bin/node']) {
    const result = await new Promise<string | null>((resolve) => {
      const child = spawn(node, ['-e', attempt, socket], { uid: 65534, gid: 65534 });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.on('error', () => resolve(null));
      child.on('close', () => resolve(out.trim()));
    });
    if (result) return result;
  }
  throw new Error('no Node binary that the user nobody may run');
}

describe('CLI commands while the service runs (embedded database)', () => {
  let dataDir: string;
  let server: ServerProcess;
  const env = () => ({ DATA_DIR: dataDir });

  beforeAll(async () => {
    // Embedded on both lanes: the socket exists only for PGlite, which one process holds.
    dataDir = join(await mkdtemp(join(tmpdir(), 'parley-socket-')), 'data');
    server = await startServerProcess(env());
    await server.waitFor(/parley listening on http:\/\/127\.0\.0\.1:\d+/);
  });
  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await server?.exited;
    await rm(join(dataDir, '..'), { recursive: true, force: true });
  });

  it('keys create answers through the running service, and the new key works against it at once', async () => {
    const created = await runCli(['keys', 'create', 'erin', '--json'], env());
    expect(created.code, created.stderr).toBe(0);
    const { apiKey, username } = JSON.parse(created.stdout);
    expect(username).toBe('erin');
    expect(apiKey).toMatch(/^pk_/);
    const me = await fetch(`${server.url}/v2/creators/me`, { headers: { 'x-api-key': apiKey } });
    expect(me.status).toBe(200);
    expect((await me.json()).creator.username).toBe('erin');

    const granted = await runCli(['manna', 'grant', 'erin', '12.5', '--json'], env());
    expect(granted.code, granted.stderr).toBe(0);
    expect(JSON.parse(granted.stdout)).toMatchObject({ amount: 12.5, kind: 'forever', foreverBalance: 12.5 });
    const graphql = await fetch(`${server.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
      body: JSON.stringify({ query: '{ me { foreverBalance } }' }),
    });
    expect((await graphql.json()).data.me.foreverBalance).toBe(12.5);

    expect((await runCli(['migrate'], env())).stdout.trim()).toBe('database is up to date');
    // The service logs that a command came, never what it answered.
    expect(server.output()).toContain('CLI command over the local socket');
    expect(server.output()).not.toContain(apiKey);
  });

  it("a command's error comes back as the same message, with exit code 1, and changes nothing", async () => {
    const bad = await runCli(['keys', 'create', 'not valid!'], env());
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/must be/);
    expect(bad.stderr).not.toMatch(/\n\s+at /);
    const unknown = await runCli(['manna', 'grant', 'nobody-here', '5'], env());
    expect(unknown.code).toBe(1);
    expect(unknown.stderr.trim()).not.toBe('');
  });

  it("only the service's own user can reach the socket: owner-only socket in an owner-only directory", async () => {
    const socket = join(dataDir, 'parley.sock');
    expect((await stat(socket)).isSocket()).toBe(true);
    expect((await stat(socket)).mode & 0o777).toBe(0o600);
    expect((await stat(dataDir)).mode & 0o777).toBe(0o700);
    if (process.getuid?.() !== 0) return;
    // As root, the test can be another user: `nobody` tries to connect and is refused.
    expect(await connectAsNobody(socket)).toBe('EACCES');
  });

  it('with the service stopped, the CLI opens the database itself again', async () => {
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    await expect(stat(join(dataDir, 'parley.sock'))).rejects.toThrow(/ENOENT/);
    const created = await runCli(['keys', 'create', 'frank', '--json'], env());
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout).username).toBe('frank');
  });

  it('a socket left by a killed service, while a live process that takes no commands holds the directory: the CLI says so, without a crash', async () => {
    const socket = join(dataDir, 'parley.sock');
    // A socket file that nothing listens on any more: its process was killed before it could remove it.
    const binder = spawn(process.execPath, [
      '-e',
      `require('node:net').createServer().listen(process.argv[1], () => process.kill(process.pid, 'SIGKILL'))`,
      socket,
    ]);
    await new Promise((resolve) => binder.on('close', resolve));
    expect((await stat(socket)).isSocket()).toBe(true);
    // The directory's holder is alive but listens nowhere (the killed service's pid, taken by another process).
    const holder = spawn('sleep', ['60']);
    try {
      await writeFile(join(dataDir, 'parley.pid'), String(holder.pid));
      for (const args of [
        ['keys', 'create', 'grace'],
        ['backup', join(dataDir, '..', 'refused.backup')],
      ]) {
        const refused = await runCli(args, env());
        expect(refused.code, args[0]).toBe(1);
        expect(refused.stderr, args[0]).toMatch(
          new RegExp(`is in use by another parley process \\(pid ${holder.pid}\\) that takes no commands`),
        );
        expect(refused.stderr, args[0]).not.toMatch(/ECONNREFUSED|Unhandled|\n\s+at /);
      }
    } finally {
      holder.kill('SIGKILL');
      await new Promise((resolve) => holder.on('close', resolve));
    }
  });
});
