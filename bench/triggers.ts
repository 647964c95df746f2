// Triggers benchmark: N triggers due in the same second, on the embedded default (one instance on
// PGlite) and on two instances sharing PostgreSQL and Redis, with a fast fake provider. Counted
// from the database once the services have stopped: duplicated runs (an occurrence with two runs,
// or a run with two prompts), missed runs (a trigger with none), failed runs (with their reasons),
// unfinished runs (still running when the wait ended), and the lateness from the scheduled second
// to the prompt's creation (p50, p99). The baseline, in the same run on the same instances: N
// clients sending the same prompt through `POST /v2/sessions` in one second (each a new session,
// as a trigger's run is); the triggers' lateness is given as a ratio to its. Then the cost of idle
// triggers: two embedded instances side by side, one with 10,000 triggers waiting (due next year)
// and one with none, their CPU time over the same interleaved windows.
//   npm run bench:triggers [-- --levels 100,1000 --deployments embedded,postgres --idle 10000 --window 10000 --rounds 3 --make-concurrency 4 --seed]
import { type ChildProcess, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { openDatabase } from '../src/db/database.ts';
import { newDatabaseOn } from '../test/helpers/database.ts';
import { startPostgresCluster, startRedisServer } from '../test/helpers/servers.ts';
import { serveArgs } from '../test/helpers/service-command.ts';
import { quantile, sleep, start, startPacedProvider } from './streaming.ts';

const { values } = parseArgs({
  options: {
    levels: { type: 'string', default: '100,1000' },
    deployments: { type: 'string', default: 'embedded,postgres' },
    idle: { type: 'string', default: '10000' },
    window: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '3' },
    'make-concurrency': { type: 'string', default: '4' },
    // Embedded only: the triggers are written to the database before the instance starts (as the
    // idle cost's are), so a level of 1,000 does not wait an hour for REST on a loaded machine.
    seed: { type: 'boolean', default: false },
  },
});
const levels = values.levels
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const deployments = values.deployments.split(',') as ('embedded' | 'postgres')[];
const idleCount = Number(values.idle);
const windowMs = Number(values.window);
const rounds = Number(values.rounds);
const makeConcurrency = Number(values['make-concurrency']);
const seeded = values.seed ?? false;

// Replies of five pieces at 100 a second: the run is the prompt, not the model.
const provider = await startPacedProvider(5, 100);
let postgres: Awaited<ReturnType<typeof startPostgresCluster>> | undefined;
let redis: Awaited<ReturnType<typeof startRedisServer>> | undefined;
const cleanups: (() => void)[] = [];
process.on('exit', () => {
  for (const c of cleanups) c();
  postgres?.stop();
  redis?.stop();
});

const baseEnv = (extra: Record<string, string>) => ({
  LLM_BASE_URL: provider.url,
  LOG_LEVEL: 'warn',
  TRIGGERS_PER_USER: '20000',
  RATE_LIMIT_DEFAULT: '0',
  RATE_LIMIT_FREE: '0',
  RATE_LIMIT_PRO: '0',
  RATE_LIMIT_ANONYMOUS: '0',
  ...extra,
});

interface Deployment {
  urls: string[];
  pids: number[];
  children: ChildProcess[];
  env: Record<string, string>;
  database: { kind: 'pglite'; dataDir: string } | { kind: 'postgres'; url: string };
}

async function deploy(kind: 'embedded' | 'postgres', instances: number): Promise<Deployment> {
  let env: Record<string, string>;
  let database: Deployment['database'];
  if (kind === 'embedded') {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-bench-triggers-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    env = baseEnv({ DATA_DIR: dataDir });
    database = { kind: 'pglite', dataDir };
  } else {
    postgres ??= await startPostgresCluster();
    redis ??= await startRedisServer();
    const { url } = await newDatabaseOn(postgres.url);
    env = baseEnv({ DATABASE_URL: url, REDIS_URL: redis.url });
    database = { kind: 'postgres', url };
  }
  const urls: string[] = [];
  const pids: number[] = [];
  const children: Deployment['children'] = [];
  for (let i = 0; i < instances; i++) {
    const { child, match } = await start(serveArgs(), { ...env, PORT: '0' }, /parley listening on (http:\/\/[\d.:]+)/);
    urls.push(match[1]!);
    pids.push(child.pid!);
    children.push(child);
  }
  return { urls, pids, children, env, database };
}

async function stop(d: Deployment) {
  await Promise.all(
    d.children.map(
      (c) =>
        new Promise((resolve) => {
          if (c.exitCode !== null) return resolve(null);
          c.once('exit', resolve);
          c.kill('SIGTERM');
        }),
    ),
  );
}

async function call(url: string, key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as any;
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** A user with a key and an agent, on the deployment. */
async function owner(d: Deployment, name: string) {
  const { match } = await start(['bin/parley.js', 'keys', 'create', name, '--json'], d.env, /"apiKey":\s*"([^"]+)"/);
  const key = match[1]!;
  const made = await call(d.urls[0]!, key, 'POST', '/graphql', {
    query: 'mutation($input: CreateAgentInput!) { createAgent(input: $input) { id rawId } }',
    variables: { input: { name: 'Bench', key: `bench-${name}-${Date.now()}`, public: false } },
  });
  return { key, agentId: made.data.createAgent.rawId as string };
}

/** A schedule that fires once a year, at `at`'s second (UTC). */
const yearlyAt = (at: Date) => ({
  second: String(at.getUTCSeconds()),
  minute: String(at.getUTCMinutes()),
  hour: String(at.getUTCHours()),
  day_of_month: String(at.getUTCDate()),
  month: String(at.getUTCMonth() + 1),
});

/** Makes `n` triggers over the deployment's instances, `concurrency` requests at a time (16 at once for one user met 503s on PostgreSQL under load: each create locks its user's row). */
async function makeTriggers(d: Deployment, who: { key: string; agentId: string }, n: number, at: Date, concurrency = makeConcurrency) {
  let next = 0;
  const ids: string[] = [];
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (next < n) {
        const i = next++;
        const url = d.urls[(worker + i) % d.urls.length]!;
        const made = await call(url, who.key, 'POST', `/v2/agents/${who.agentId}/triggers`, {
          name: `Bench ${i}`,
          prompt: `Bench occurrence ${i}`,
          schedule: yearlyAt(at),
        });
        ids.push(made.triggerId);
      }
    }),
  );
  return ids;
}

/** What the database says of the triggers' runs and prompts. */
async function outcome(database: Deployment['database'], triggerIds: string[]) {
  const sql = `
    SELECT t."id" AS trigger, r."id" AS run, r."scheduledFor" AS scheduled, r."status"::text AS status, r."error" AS error,
           (SELECT count(*) FROM "Message" m WHERE m."sessionId" = r."sessionId" AND m."role" = 'user')::int AS prompts,
           (SELECT min(m."createdAt") FROM "Message" m WHERE m."sessionId" = r."sessionId" AND m."role" = 'user') AS prompted
    FROM "Trigger" t LEFT JOIN "TriggerRun" r ON r."triggerId" = t."id"
    WHERE t."id" = ANY($1)`;
  const rows = await query<{
    trigger: string;
    run: string | null;
    scheduled: Date | null;
    status: string | null;
    error: string | null;
    prompts: number;
    prompted: Date | null;
  }>(database, sql, [triggerIds]);
  const runsOf = new Map<string, number>();
  let duplicated = 0;
  let failed = 0;
  let unfinished = 0;
  const reasons = new Map<string, number>();
  const lateness: number[] = [];
  for (const row of rows) {
    if (!row.run) continue;
    runsOf.set(row.trigger, (runsOf.get(row.trigger) ?? 0) + 1);
    if (row.status === 'failed') {
      failed++;
      reasons.set(row.error ?? '?', (reasons.get(row.error ?? '?') ?? 0) + 1);
    }
    if (row.status === 'running') unfinished++;
    duplicated += Math.max(0, row.prompts - 1);
    if (row.prompted && row.scheduled) lateness.push(new Date(row.prompted).getTime() - new Date(row.scheduled).getTime());
  }
  for (const n of runsOf.values()) duplicated += Math.max(0, n - 1);
  const missed = triggerIds.filter((id) => !runsOf.has(id)).length;
  return { duplicated, missed, failed, unfinished, reasons, lateness };
}

async function query<T>(database: Deployment['database'], sql: string, params: unknown[]): Promise<T[]> {
  if (database.kind === 'postgres') {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      return (await client.query(sql, params)).rows;
    } finally {
      await client.end();
    }
  }
  const db = await openDatabase({ kind: 'pglite', dataDir: database.dataDir });
  try {
    return await db.prisma.$queryRawUnsafe(sql, ...params);
  } finally {
    await db.close();
  }
}

/**
 * The baseline: `n` prompts sent by clients through `POST /v2/sessions` in the second `at` (each
 * starting a session, as a trigger's run does), over the deployment's instances. Returns the
 * requests refused or broken; the prompts are counted from the database later (`baselineOutcome`).
 */
async function sendBaseline(d: Deployment, who: { key: string; agentId: string }, n: number, at: Date, marker: string) {
  await sleep(at.getTime() - Date.now());
  const results = await Promise.allSettled(
    Array.from({ length: n }, (_, i) =>
      call(d.urls[i % d.urls.length]!, who.key, 'POST', '/v2/sessions', { agent_ids: [who.agentId], content: `${marker} ${i}` }),
    ),
  );
  return results.filter((r) => r.status === 'rejected').length;
}

/** What the database says of the baseline's prompts: their lateness from `at`, and replies failed or not finished. */
async function baselineOutcome(database: Deployment['database'], marker: string, at: Date) {
  const rows = await query<{ prompted: Date; reply: string | null }>(
    database,
    `SELECT p."createdAt" AS prompted, (SELECT r."status"::text FROM "Message" r WHERE r."promptId" = p."id" AND r."role" = 'assistant' LIMIT 1) AS reply
     FROM "Message" p WHERE p."role" = 'user' AND p."content" LIKE $1`,
    [`${marker} %`],
  );
  return {
    prompts: rows.length,
    failed: rows.filter((r) => r.reply === 'failed' || r.reply === 'cancelled').length,
    unfinished: rows.filter((r) => r.reply === null || r.reply === 'streaming').length,
    lateness: rows.map((r) => new Date(r.prompted).getTime() - at.getTime()),
  };
}

/** Starts one more instance of the deployment. */
async function startInstance(d: Deployment) {
  const { child, match } = await start(serveArgs(), { ...d.env, PORT: '0' }, /parley listening on (http:\/\/[\d.:]+)/);
  d.urls.push(match[1]!);
  d.pids.push(child.pid!);
  d.children.push(child);
}

/**
 * `--seed`: a key made by `parley keys create`, its user's agent and `n` triggers due at `at`
 * written straight to the database, then the deployment's instances started. The triggers are as
 * the service plans them (their next run set, no job yet): the sweep at start queues them.
 */
async function seedDue(d: Deployment, n: number, at: Date, instances: number) {
  const name = `seeded${n}`;
  const { match } = await start(['bin/parley.js', 'keys', 'create', name, '--json'], d.env, /"apiKey":\s*"([^"]+)"/);
  const db = await openDatabase(d.database);
  let agentId: string;
  try {
    const user = await db.prisma.user.findFirstOrThrow({ where: { username: name } });
    const agentUser = await db.prisma.user.create({ data: { username: `${name}-agent`, type: 'agent' } });
    await db.prisma.agent.create({ data: { id: agentUser.id, ownerId: user.id, name: 'Bench' } });
    agentId = agentUser.id;
    const s = yearlyAt(at);
    const cron = `${s.second} ${s.minute} ${s.hour} ${s.day_of_month} ${s.month} *`;
    await db.prisma.trigger.createMany({
      data: Array.from({ length: n }, (_, i) => ({
        name: `Bench ${i}`,
        prompt: `Bench occurrence ${i}`,
        agentId,
        userId: user.id,
        cron,
        nextRun: at,
      })),
    });
  } finally {
    await db.close();
  }
  for (let i = 0; i < instances; i++) await startInstance(d);
  return { who: { key: match[1]!, agentId }, ids: await triggerIdsOf(d, match[1]!) };
}

async function triggerIdsOf(d: Deployment, key: string): Promise<string[]> {
  const { triggers } = await call(d.urls[0]!, key, 'GET', '/v2/agents/triggers');
  return triggers.map((t: any) => t.id);
}

/** One level on one deployment: make the triggers, let them all fire in one second, count. */
async function due(kind: 'embedded' | 'postgres', n: number) {
  const instances = kind === 'embedded' ? 1 : 2;
  const d = await deploy(kind, seeded ? 0 : instances);
  try {
    let who: { key: string; agentId: string };
    let ids: string[];
    let at: Date;
    const made = Date.now();
    if (seeded) {
      // Time for the instance to start and its sweep to queue them, on a loaded machine.
      at = new Date(Math.ceil((Date.now() + 90_000 + n * 60) / 1000) * 1000);
      ({ who, ids } = await seedDue(d, n, at, instances));
    } else {
      who = await owner(d, `bench${n}`);
      // How long making one takes on this machine now (ten due next year, not counted), so that
      // the second they are all due comes after the last is made.
      const calibrating = Date.now();
      await makeTriggers(d, who, 10, new Date(Date.now() + 200 * 86_400_000), 4);
      const perTrigger = (Date.now() - calibrating) / 10;
      at = new Date(Math.ceil((Date.now() + 10_000 + n * perTrigger * 2) / 1000) * 1000);
      ids = await makeTriggers(d, who, n, at);
    }
    const makeMs = Date.now() - made;
    if (Date.now() > at.getTime()) throw new Error(`making ${n} triggers took past their time (${makeMs} ms)`);
    // Wait for the second, then until operation 16 shows every run ended (or a minute passes).
    await sleep(at.getTime() - Date.now());
    const deadline = Date.now() + 60_000;
    for (;;) {
      const { triggers } = await call(d.urls[0]!, who.key, 'GET', '/v2/agents/triggers');
      const ended = triggers.filter((t: any) => t.runs.length > 0 && t.runs.every((r: any) => r.status !== 'running')).length;
      if (ended === n || Date.now() > deadline) break;
      await sleep(1000);
    }
    // The baseline on the same instances: n prompts sent by clients in one second.
    const marker = `Baseline ${n} ${Date.now()}`;
    const baseAt = new Date(Math.ceil((Date.now() + 2_000) / 1000) * 1000);
    const refused = await sendBaseline(d, who, n, baseAt, marker);
    await sleep(Math.min(60_000, 5_000 + n * 20));
    await stop(d);
    const result = await outcome(d.database, ids);
    const base = await baselineOutcome(d.database, marker, baseAt);
    return { kind, n, makeMs, ...result, baseline: { refused, ...base } };
  } finally {
    await stop(d);
  }
}

/** CPU time (user + system) of a process so far, in ms. */
const cpuMs = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
};

/** `count` triggers of one owner, due next year, written before the service starts: it plans and queues them itself. */
async function seedIdle(dataDir: string, count: number) {
  const db = await openDatabase({ kind: 'pglite', dataDir });
  try {
    const { applyMigrations } = await import('../src/db/migrate.ts');
    await applyMigrations(db.migrationAdapterFactory);
    const user = await db.prisma.user.create({ data: { username: 'idle-owner' } });
    const agentUser = await db.prisma.user.create({ data: { username: 'idle-agent', type: 'agent' } });
    await db.prisma.agent.create({ data: { id: agentUser.id, ownerId: user.id, name: 'Idle' } });
    const at = new Date(Date.now() + 200 * 86_400_000);
    const cron = `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} ${at.getUTCDate()} ${at.getUTCMonth() + 1} *`;
    for (let i = 0; i < count; i += 1000)
      await db.prisma.trigger.createMany({
        data: Array.from({ length: Math.min(1000, count - i) }, (_, k) => ({
          name: `Idle ${i + k}`,
          prompt: 'Not yet',
          agentId: agentUser.id,
          userId: user.id,
          cron,
        })),
      });
  } finally {
    await db.close();
  }
}

/**
 * Two embedded instances side by side, one holding `count` triggers due next year (planned at its
 * start, their jobs queued only as they come near) and one with none: their CPU over the same
 * windows, once the first has planned them all.
 */
async function idleCost(count: number) {
  const none = await deploy('embedded', 0);
  const many = await deploy('embedded', 0);
  if (many.database.kind !== 'pglite') throw new Error('embedded');
  await seedIdle(many.database.dataDir, count);
  for (const d of [none, many]) {
    const { child, match } = await start(serveArgs(), { ...d.env, PORT: '0' }, /parley listening on (http:\/\/[\d.:]+)/);
    d.urls.push(match[1]!);
    d.pids.push(child.pid!);
    d.children.push(child);
  }
  try {
    // Settled: the instance with triggers has planned and queued them (a burst at start).
    const started = Date.now();
    // Two quiet windows in a row (the first window after the start never counts as one).
    for (let last = Number.POSITIVE_INFINITY; ; ) {
      const before = cpuMs(many.pids[0]!);
      await sleep(5_000);
      const spent = cpuMs(many.pids[0]!) - before;
      if ((spent < 1_000 && last < 1_000) || Date.now() - started > 600_000) break;
      last = spent;
    }
    const settleMs = Date.now() - started;
    const windows: { none: number; many: number }[] = [];
    for (let r = 0; r < rounds; r++) {
      const before = { none: cpuMs(none.pids[0]!), many: cpuMs(many.pids[0]!) };
      await sleep(windowMs);
      windows.push({ none: cpuMs(none.pids[0]!) - before.none, many: cpuMs(many.pids[0]!) - before.many });
    }
    return { count, makeMs: settleMs, windows };
  } finally {
    await stop(none);
    await stop(many);
  }
}

const commit = (() => {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: import.meta.dirname,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return process.env.BENCH_COMMIT ?? 'unknown';
  }
})();
console.log(
  `bench:triggers ${new Date().toISOString()} (${commit}); load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
let failing = false;
for (const kind of deployments) {
  for (const n of levels) {
    const r = await due(kind, n);
    const [p50, p99] = [quantile(r.lateness, 0.5), quantile(r.lateness, 0.99)];
    const b = r.baseline;
    const [b50, b99] = [quantile(b.lateness, 0.5), quantile(b.lateness, 0.99)];
    const ratio = (x: number, y: number) => `${(x / Math.max(1, y)).toFixed(2)}×`;
    console.log(
      `${kind === 'embedded' ? 'embedded, 1 instance' : 'PostgreSQL + Redis, 2 instances'}; ${n} due in one second: ` +
        `duplicated ${r.duplicated}, missed ${r.missed}, failed ${r.failed}, unfinished ${r.unfinished}; ` +
        `lateness p50 ${p50} ms (${ratio(p50, b50)} the baseline), p99 ${p99} ms (${ratio(p99, b99)}), max ${Math.max(...r.lateness)} ms ` +
        `(${r.lateness.length} prompts; ${seeded ? 'seeded and started' : 'made'} in ${(r.makeMs / 1000).toFixed(1)} s); load average ${loadavg()[0]!.toFixed(2)}`,
    );
    for (const [reason, count] of r.reasons) console.log(`  failed: ${count} × ${reason}`);
    console.log(
      `  baseline, ${n} prompts sent by clients in one second: refused ${b.refused}, stored ${b.prompts}, ` +
        `replies failed ${b.failed}, unfinished ${b.unfinished}; lateness p50 ${b50} ms, p99 ${b99} ms`,
    );
    if (r.duplicated || r.missed || r.failed || r.unfinished) failing = true;
  }
}
if (idleCount > 0) {
  const r = await idleCost(idleCount);
  for (const w of r.windows)
    console.log(
      `idle ${r.count} triggers vs none, ${windowMs / 1000} s window: CPU ${w.many.toFixed(0)} ms vs ${w.none.toFixed(0)} ms ` +
        `(${(w.many / Math.max(1, w.none)).toFixed(2)}×); load average ${loadavg()[0]!.toFixed(2)}`,
    );
  console.log(`(${r.count} triggers planned and queued by the instance within ${(r.makeMs / 1000).toFixed(1)} s of its start)`);
}
if (failing) console.log('FAILING: runs duplicated, missed, failed or unfinished');
process.exit(failing ? 1 : 0);
