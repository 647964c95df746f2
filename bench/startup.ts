// Measures start-up the way a person waits for it: from typing `npm start` (npm's own start-up
// included) to the first 200 from GET /healthz, on a data directory that does not exist yet
// (cold, a first start) and on one an earlier start left (warm), with the service's default
// log level and its output read as a terminal would. A bare `node -e 0` runs in the same rounds
// as a yardstick. Absolute times on a shared machine drift with its load; the rounds are
// interleaved so that drift hits every variant alike, and the CPU time the processes used until
// the answer moves much less with the load than the time does.
//   npm run bench:startup [-- --rounds 7 --baseline <checkout> --node <node binary> --root <checkout>]
// --baseline measures another checkout (say, main before a change) in the same rounds, and
// gives each figure as a ratio to it, round by round. --node runs npm, the service and the
// yardstick on another Node (it goes first on PATH); by default, the `node` on PATH, which is
// what `npm start` runs on. --root measures another checkout instead of this one.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort } from '../test/helpers/servers.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '7' },
    root: { type: 'string' },
    baseline: { type: 'string' },
    node: { type: 'string' },
  },
});
const rounds = Number(values.rounds);
const root = resolve(values.root ?? fileURLToPath(new URL('..', import.meta.url)));
const baseline = values.baseline ? resolve(values.baseline) : undefined;

/**
 * The environment of a person's shell: none of the variables `npm run bench:startup` set (npm
 * would read its `npm_config_*` as its own settings), and nothing that would choose another
 * database, event bus or log level than a first `npm start` gets.
 */
function personEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !/^(npm_|INIT_CWD$|NODE$|DATABASE_URL$|REDIS_URL$|LOG_LEVEL$|DATA_DIR$|HOST$|PORT$)/.test(name),
    ),
  );
  if (values.node) env.PATH = `${dirname(resolve(values.node))}${delimiter}${env.PATH}`;
  return env;
}
const env = personEnv();
const versionOf = (command: string) => execFileSync(command, ['--version'], { env, encoding: 'utf8' }).trim();

interface Variant {
  name: string;
  /** The checkout it starts, or none for the yardstick. */
  checkout?: string;
  /** A data directory for this run: a new one (cold) or the checkout's warm one. */
  cold?: boolean;
}

const scratch = await mkdtemp(join(tmpdir(), 'parley-bench-startup-'));
const checkouts = [root, ...(baseline ? [baseline] : [])];
const label = (checkout: string) => (checkout === root ? '' : ' (baseline)');
const variants: Variant[] = [
  { name: 'node -e 0' },
  ...checkouts.flatMap((checkout) => [
    { name: `npm start, new data dir${label(checkout)}`, checkout, cold: true },
    { name: `npm start, existing data dir${label(checkout)}`, checkout, cold: false },
  ]),
];
const warmDir = (checkout: string) => join(scratch, `warm-${checkouts.indexOf(checkout)}`);

const clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));
/** /proc/<pid>/stat's fields after the command name: state is [0], the group [2]. */
const statOf = async (path: string) => {
  const stat = await readFile(path, 'utf8').catch(() => '');
  return stat ? stat.slice(stat.lastIndexOf(')') + 2).split(' ') : null;
};

/**
 * CPU time (user + system, every thread) the processes of a group have used, with that of their
 * children that have ended (the service's short-lived helper); and the service's main thread's
 * alone, the one whose work the first answer waits on.
 */
async function cpuOf(group: number): Promise<{ all: number; mainThread: number }> {
  let all = 0;
  let mainThread = 0;
  for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
    const fields = await statOf(`/proc/${pid}/stat`);
    if (!fields || Number(fields[2]) !== group) continue;
    // utime, stime, cutime, cstime.
    all += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    const command = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (command.includes('bin/parley.js')) {
      const main = await statOf(`/proc/${pid}/task/${pid}/stat`);
      if (main) mainThread = Number(main[11]) + Number(main[12]);
    }
  }
  return { all: (all * 1000) / clockTicks, mainThread: (mainThread * 1000) / clockTicks };
}

const groupAlive = (group: number) => {
  try {
    process.kill(-group, 0);
    return true;
  } catch {
    return false;
  }
};

interface Sample {
  ms: number;
  /** Not for the yardstick, which is gone before it could be read. */
  cpu?: { all: number; mainThread: number };
}

/** From spawn to exit (the yardstick) or to the first 200 from /healthz (`npm start`). */
let starts = 0;
async function run(variant: Variant): Promise<Sample> {
  const checkout = variant.checkout;
  const dataDir = variant.cold ? join(scratch, `new-${++starts}`, 'data') : undefined;
  if (!checkout) {
    const started = performance.now();
    execFileSync('node', ['-e', '0'], { env });
    return { ms: performance.now() - started };
  }
  const port = await freePort();
  const started = performance.now();
  // Its own process group, so that npm, the shell it runs the script with and the service all
  // get the signal; the output is read as it comes, as a terminal reads it.
  const child = spawn('npm', ['start'], {
    cwd: checkout,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...env, PORT: String(port), DATA_DIR: dataDir ?? warmDir(checkout) },
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  let gone = false;
  void exited.then(() => (gone = true));
  let status = 0;
  while (status !== 200) {
    if (gone) throw new Error(`${variant.name} exited before answering:\n${output}`);
    status = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status !== 200) await new Promise((r) => setTimeout(r, 10));
  }
  const ms = performance.now() - started;
  const cpu = await cpuOf(child.pid!);
  process.kill(-child.pid!, 'SIGTERM');
  await exited;
  // npm exits on the signal before the service it started has closed the database.
  while (groupAlive(child.pid!)) await new Promise((r) => setTimeout(r, 20));
  if (dataDir) await rm(dirname(dataDir), { recursive: true, force: true });
  return { ms, cpu };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

try {
  console.log(`node ${versionOf('node')}, npm ${versionOf('npm')}, ${rounds} rounds, ${cpus().length} cores, load average ${load()}`);
  for (const checkout of checkouts) {
    const { start } = (JSON.parse(await readFile(join(checkout, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts;
    console.log(`${checkout}${label(checkout)}: npm start runs \`${start}\``);
    // The warm directory is made by one start before the rounds (not timed), as a user's is;
    // that start also rebuilds dist/ if it is stale.
    await run({ name: 'first start', checkout, cold: false });
  }
  const samples = new Map(variants.map((v) => [v.name, [] as Sample[]]));
  for (let r = 0; r < rounds; r++) {
    for (const v of variants) samples.get(v.name)!.push(await run(v));
  }
  const ms = (name: string) => samples.get(name)!.map((s) => s.ms);
  const cpu = (name: string) => samples.get(name)!.flatMap((s) => (s.cpu ? [s.cpu.all] : []));
  const mainThread = (name: string) => samples.get(name)!.flatMap((s) => (s.cpu ? [s.cpu.mainThread] : []));
  /** The median of the round-by-round ratios to the baseline's same variant. */
  const ratio = (xs: number[], of: number[]) => `${median(xs.map((x, i) => x / of[i]!)).toFixed(2)}×`;
  console.log(
    `\n| variant | time, median (min–max) | CPU, all processes | CPU, service's main thread |${baseline ? ' time vs baseline | CPU vs baseline |' : ''}`,
  );
  console.log(`| --- | --- | --- | --- |${baseline ? ' --- | --- |' : ''}`);
  for (const v of variants) {
    const xs = ms(v.name);
    const figures = [`${median(xs).toFixed(0)} ms (${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)})`];
    figures.push(
      v.checkout ? `${median(cpu(v.name)).toFixed(0)} ms` : '—',
      v.checkout ? `${median(mainThread(v.name)).toFixed(0)} ms` : '—',
    );
    if (baseline) {
      const against = v.checkout === root ? `${v.name}${label(baseline)}` : undefined;
      figures.push(...(against ? [ratio(xs, ms(against)), ratio(cpu(v.name), cpu(against))] : ['', '']));
    }
    console.log(`| ${v.name} | ${figures.join(' | ')} |`);
  }
  console.log(`\nload average at the end: ${load()}`);
} finally {
  await rm(scratch, { recursive: true, force: true });
}
