// Measures how long `npm start` takes to answer: from spawning the process to the first 200 from
// GET /healthz, on a fresh embedded data directory (cold) and on one an earlier run left (warm),
// against a bare `node -e 0` spawned in the same rounds. Absolute times on a shared machine
// drift with its load; the rounds are interleaved so that drift hits every variant alike.
//   npm run bench:startup [-- --rounds 7 --root /path/to/another/checkout --npm]
// --root measures another checkout (say, main before a change) with its own start script;
// --npm also runs `npm start` itself (adds npm's own start-up, about 0.3 s here).
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort } from '../test/helpers/servers.ts';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '7' }, root: { type: 'string' }, npm: { type: 'boolean', default: false } },
});
const rounds = Number(values.rounds);
const root = resolve(values.root ?? fileURLToPath(new URL('..', import.meta.url)));
// The start script as the checkout defines it, run by a shell as npm would run it (minus npm).
const startScript = (JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;

interface Variant {
  name: string;
  command: string[];
  /** A data directory for this run, or none for a command that serves nothing. */
  dataDir?: () => Promise<{ dir: string; done(): Promise<void> }>;
}

const scratch = await mkdtemp(join(tmpdir(), 'parley-bench-startup-'));
const freshDir = async () => {
  const dir = await mkdtemp(join(scratch, 'cold-'));
  return { dir, done: () => rm(dir, { recursive: true, force: true }) };
};
const warmDir = join(scratch, 'warm');
const keptDir = async () => ({ dir: warmDir, done: async () => {} });

const variants: Variant[] = [
  { name: 'node -e 0', command: [process.execPath, '-e', '0'] },
  { name: 'start, fresh data dir (cold)', command: ['sh', '-c', startScript], dataDir: freshDir },
  { name: 'start, existing data dir (warm)', command: ['sh', '-c', startScript], dataDir: keptDir },
];
if (values.npm) {
  variants.push(
    { name: 'npm start, cold', command: ['npm', 'start', '--silent'], dataDir: freshDir },
    { name: 'npm start, warm', command: ['npm', 'start', '--silent'], dataDir: keptDir },
  );
}

/**
 * CPU time (user + system, all threads) used so far by the processes of a group: less sensitive
 * to the machine's load than wall time, though not immune (caches, frequency).
 */
async function groupCpuMs(pgid: number): Promise<number> {
  let ticks = 0;
  for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the command: state, ppid, pgrp, ... utime and stime are the 12th and 13th.
    if (Number(fields[2]) === pgid) ticks += Number(fields[11]) + Number(fields[12]);
  }
  return (ticks * 1000) / clockTicks;
}
const clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));

interface Sample {
  ms: number;
  /** Not for the bare node, which is gone before it could be read. */
  cpuMs?: number;
}

/** From spawn to exit (bare node) or to the first 200 from /healthz (the service). */
async function run(variant: Variant): Promise<Sample> {
  const data = await variant.dataDir?.();
  const port = await freePort();
  const { DATABASE_URL: _url, ...env } = process.env;
  const started = performance.now();
  // Its own process group, so npm, the shell and the server all get the signal.
  const child = spawn(variant.command[0]!, variant.command.slice(1), {
    cwd: root,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...(data ? { DATA_DIR: data.dir } : {}) },
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (!data) {
    await exited;
    return { ms: performance.now() - started };
  } else {
    let status = 0;
    let gone = false;
    void exited.then(() => (gone = true));
    while (status !== 200) {
      if (gone) throw new Error(`${variant.name} exited before answering:\n${stderr}`);
      status = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.status,
        () => 0,
      );
      if (status !== 200) await new Promise((r) => setTimeout(r, 10));
    }
    const ms = performance.now() - started;
    const cpuMs = await groupCpuMs(child.pid!);
    process.kill(-child.pid!, 'SIGTERM');
    await exited;
    // npm exits on the signal before the server it started has closed the database.
    while (groupAlive(child.pid!)) await new Promise((r) => setTimeout(r, 20));
    await data.done();
    return { ms, cpuMs };
  }
}

const groupAlive = (pgid: number) => {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
};

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

try {
  console.log(`root: ${root}\nstart script: ${startScript}\n${rounds} rounds\n`);
  // The warm directory is made by one start before the rounds (not timed), as a user's is.
  await run({ ...variants[1]!, dataDir: async () => ({ dir: warmDir, done: async () => {} }) });
  const samples = new Map(variants.map((v) => [v.name, [] as Sample[]]));
  for (let r = 0; r < rounds; r++) {
    for (const v of variants) samples.get(v.name)!.push(await run(v));
  }
  const bare = median(samples.get('node -e 0')!.map((s) => s.ms));
  console.log('| variant | median | min | max | ratio to node -e 0 | CPU time (median) |\n| --- | --- | --- | --- | --- | --- |');
  for (const v of variants) {
    const xs = samples.get(v.name)!.map((s) => s.ms);
    const cpu = samples.get(v.name)!.flatMap((s) => (s.cpuMs === undefined ? [] : [s.cpuMs]));
    const m = median(xs);
    console.log(
      `| ${v.name} | ${m.toFixed(0)} ms | ${Math.min(...xs).toFixed(0)} ms | ${Math.max(...xs).toFixed(0)} ms | ${(m / bare).toFixed(1)}× | ${cpu.length ? `${median(cpu).toFixed(0)} ms` : '—'} |`,
    );
  }
  console.log(
    `\nload average at the end: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} (${cpus().length} cores)`,
  );
} finally {
  await rm(scratch, { recursive: true, force: true });
}
