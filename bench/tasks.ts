// Task updates benchmark: N tasks progressing at once, each followed live by its own watcher.
// N users (made by `parley keys create`'s command) each create one task through
// `POST /v2/tasks/create` (a tool served by a fake tool service on loopback) and watch it with
// `taskUpdates(taskId:)` over graphql-ws. Once every watch is open, the tool service sends for
// every task P progress lines at a steady pace and then its answer, the tasks' starts spread over
// one interval (`--ramp`) so they report out of step. Counted: tasks created, refused (an HTTP
// error status) and broken (no answer); how they ended as the service reads them afterwards
// (completed, failed, unfinished); per watcher the progress updates lost, reordered and
// duplicated and whether the completion arrived; and the latency from the tool service's write of
// a progress line to the watcher's receipt (p50, p99), with the part of it before the event was
// put on the bus (its `at`), and the service's CPU per update delivered.
// The baseline, in the same run, on the same service and the same users: N watchers of
// `sessionEvents(sessionId:)` over graphql-ws, one session each, as a reply streams P tokens at the
// same pace and spread from a paced fake provider (provider write → watcher receipt). The same
// transport, the same bus, as many watchers and events; what differs is what a task update is
// (a stored progress, on its owner's feed) against what a reply token is.
//   npm run bench:tasks [-- --levels 100,1000 --progress 20 --interval 500 --ramp 500 --rounds 1 --database postgres --make-concurrency 8]
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type Client, createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { callService } from '../src/control/socket.ts';
import { newDatabaseOn } from '../test/helpers/database.ts';
import { startPostgresCluster } from '../test/helpers/servers.ts';
import { serveArgs } from '../test/helpers/service-command.ts';
import { quantile, root, sleep, start, startPacedProvider, stopAll } from './streaming.ts';

const { values } = parseArgs({
  options: {
    levels: { type: 'string', default: '100,1000' },
    /** Progress lines per task (and tokens per reply in the baseline). */
    progress: { type: 'string', default: '20' },
    /** Milliseconds between two progress lines of one task (and two tokens of one reply). */
    interval: { type: 'string', default: '500' },
    rounds: { type: 'string', default: '1' },
    /**
     * Starts spread over this many ms (task k of n starts k/n of it after the first), so that the
     * tasks progress out of step, as tasks begun at different times do; 0 starts every one at
     * once, and every task then reports in the same instant.
     */
    ramp: { type: 'string', default: '500' },
    /** A watcher without its task's end this long after the release counts its task unfinished. */
    deadline: { type: 'string', default: '300000' },
    /** `pglite` (the embedded default) or `postgres` (a throwaway PostgreSQL cluster started for the run). */
    database: { type: 'string', default: 'pglite' },
    /** `keys create` commands run at once while making the users. */
    'make-concurrency': { type: 'string', default: '8' },
  },
});
const levels = values.levels
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const progressLines = Number(values.progress);
const intervalMs = Number(values.interval);
const rounds = Number(values.rounds);
const rampMs = Number(values.ramp);
const deadlineMs = Number(values.deadline);
const makeConcurrency = Number(values['make-concurrency']);
const most = Math.max(...levels);

// ---- the fake tool service ---------------------------------------------------------------------
/**
 * Speaks parley's HTTP tool protocol (`docs/tasks.md`, `src/executors/http.ts`): a
 * POST of `{tool, arguments, session_id}`, answered as JSON lines. Each call (`arguments.prompt`
 * names the watcher, `bench <id>`) is held until `release()` and then its own `delay(id)`, then sends `lines` progress lines
 * `interval` ms apart (`{progress, message: "p<i>"}`), noting when it wrote each, then its answer.
 */
async function startPacedToolService(lines: number, interval: number) {
  const sentAt = new Map<string, number[]>();
  const arrived = new Set<string>();
  let release!: (delay: (id: string) => number) => void;
  let released = new Promise<(id: string) => number>((resolve) => (release = resolve));
  async function handle(req: IncomingMessage, res: ServerResponse) {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw) as { arguments: { prompt?: string } };
    const id = /^bench (\S+)$/.exec(body.arguments.prompt ?? '')?.[1];
    if (!id) return void res.writeHead(400).end();
    arrived.add(id);
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    await sleep((await released)(id));
    const times: number[] = [];
    sentAt.set(id, times);
    for (let i = 0; i < lines; i++) {
      await sleep(interval);
      if (res.destroyed) return;
      res.write(`${JSON.stringify({ progress: (i + 1) / (lines + 1), message: `p${i}` })}\n`);
      times[i] = performance.now();
    }
    res.end(`${JSON.stringify({ result: { id } })}\n`);
  }
  const server = createServer((req, res) => void handle(req, res).catch(() => res.destroy()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/run`,
    sentAt,
    arrived,
    release: (delay: (id: string) => number) => release(delay),
    /** Holds the calls of the next round. */
    reset() {
      sentAt.clear();
      arrived.clear();
      released = new Promise((resolve) => (release = resolve));
    },
    close: () => server.close(),
  };
}

/** The repository's tools, and the benchmark's own: served by the tool service above, free (no manna to grant a thousand users). */
function toolsWith(url: string) {
  const dir = mkdtempSync(join(tmpdir(), 'parley-bench-tasks-tools-'));
  cpSync(join(root, 'tools'), dir, { recursive: true });
  writeFileSync(
    join(dir, 'bench_progress.yaml'),
    `key: bench_progress
name: Bench progress
description: Reports progress at a steady pace, then answers (bench/tasks.ts).
output_type: text
order: 900
cost_estimate: "0"
parameters:
  - name: prompt
    type: string
    description: Which watcher follows it.
    required: true
handler:
  http: ${url}
  timeout_ms: ${deadlineMs + 600_000}
  retries: 0
`,
  );
  return dir;
}

// ---- the service -------------------------------------------------------------------------------
const tools = await startPacedToolService(progressLines, intervalMs);
const provider = await startPacedProvider(progressLines, 1000 / intervalMs);
const dataDir = mkdtempSync(join(tmpdir(), 'parley-bench-tasks-'));
const toolsDir = toolsWith(tools.url);
const postgres = values.database === 'postgres' ? await startPostgresCluster() : null;
// Interrupted, it still removes what it made (the handler below runs on exit, not on a signal).
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(1));
process.on('exit', () => {
  postgres?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(toolsDir, { recursive: true, force: true });
});
const env: Record<string, string> = {
  NODE_ENV: 'production',
  DATA_DIR: dataDir,
  ...(postgres ? { DATABASE_URL: (await newDatabaseOn(postgres.url)).url } : {}),
  TOOLS_DIR: toolsDir,
  LLM_BASE_URL: provider.url,
  LOG_LEVEL: 'warn',
  PORT: '0',
  HOST: '127.0.0.1',
  // Every task runs at once: by default a process runs 8 tool calls at a time and queues the rest.
  TOOL_RUNS_PER_PROCESS: String(most),
  // Every user makes a handful of requests; the limits per key are left as they are, those per IP are not the point.
  RATE_LIMIT_DEFAULT: '0',
  RATE_LIMIT_FREE: '0',
  RATE_LIMIT_PRO: '0',
  RATE_LIMIT_ANONYMOUS: '0',
};
const parley = await start(serveArgs(), env, /parley listening on (http:\/\/[\d.:]+)/);
const url = parley.match[1]!;

async function call(key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json().catch(() => null)) as any };
}

/** Runs `work` over `items`, `concurrency` at a time. */
async function pooled<T, R>(items: T[], concurrency: number, work: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await work(items[i]!, i);
      }
    }),
  );
  return out;
}

/**
 * The users, one per watcher: each makes its own task, with its own key (its own limits). Made
 * by `parley keys create`'s own command: on the embedded database, asked of the running service
 * over its command socket as the CLI asks it, from this process (a thousand CLI processes take
 * some ten minutes of this machine's CPU, each starting node); on PostgreSQL, by the CLI.
 */
async function makeUsers(n: number) {
  return pooled(Array.from({ length: n }), makeConcurrency, async (_, i) => {
    if (!postgres) return (await callService(dataDir, 'keys.create', { username: `bench${i}` })).apiKey;
    const { match } = await start(['bin/parley.js', 'keys', 'create', `bench${i}`, '--json'], env, /"apiKey":\s*"([^"]+)"/);
    return match[1]!;
  });
}

/** Live event subscriptions the service holds now (all transports), from /metrics. */
async function subscribers() {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^parley_event_subscribers (\d+)/m.exec(text)?.[1] ?? Number.NaN);
}

/** Waits until `count` subscriptions are open, or `ms` pass; says whether they all opened. */
async function opened(count: number, ms: number) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if ((await subscribers()) >= count) return true;
    await sleep(250);
  }
  return false;
}

/** Waits until no more than `count` subscriptions are open (the round's own have closed), or `ms` pass. */
async function closed(count: number, ms: number) {
  for (const until = Date.now() + ms; Date.now() < until && (await subscribers()) > count; ) await sleep(250);
}

// ---- watchers ----------------------------------------------------------------------------------
interface Watch {
  latencies: number[];
  /** The part of each latency before the event was put on the bus (its `at`, stamped then): the write → publish. */
  published: number[];
  /** Distinct updates received (progress lines, or tokens). */
  received: number;
  reordered: number;
  duplicated: number;
  /** The task's completion (or the reply's message) arrived. */
  ended: boolean;
  /** The task failed or was cancelled, the reply failed, or a GraphQL error came. */
  errors: number;
  /** The subscription itself broke. */
  broken: boolean;
}

const newWatch = (): Watch => ({
  latencies: [],
  published: [],
  received: 0,
  reordered: 0,
  duplicated: 0,
  ended: false,
  errors: 0,
  broken: false,
});

/** Notes update `i` of a watch whose writes were timed in `sent`, put on the bus at `at`. */
function tally(watch: Watch, seen: Set<number>, i: number, at: string, sent: number[] | undefined) {
  const now = performance.now();
  if (seen.has(i)) return void watch.duplicated++;
  if (seen.size > 0 && i < Math.max(...seen)) watch.reordered++;
  seen.add(i);
  watch.received++;
  if (sent?.[i] === undefined) return;
  watch.latencies.push(now - sent[i]!);
  watch.published.push(Date.parse(at) - (performance.timeOrigin + sent[i]!));
}

const wsClient = (key: string) =>
  createClient({
    url: `${url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { 'X-Api-Key': key },
    retryAttempts: 0,
  });

/**
 * Subscribes and reads until `end(event)` says the watch is over (or `until` resolves); `take`
 * handles every other event. Resolves once the watch is over.
 */
function follow<E>(
  client: Client,
  query: string,
  variables: object,
  watch: Watch,
  until: Promise<void>,
  take: (event: E) => 'end' | undefined,
) {
  return new Promise<void>((resolve) => {
    const unsubscribe = client.subscribe<E>(
      { query, variables: variables as Record<string, unknown> },
      {
        next: (r) => {
          if (r.errors?.length) watch.errors++;
          else if (r.data && take(r.data) === 'end') {
            watch.ended = true;
            unsubscribe();
            resolve();
          }
        },
        error: (e) => {
          watch.broken = true;
          console.error('a watch broke:', e instanceof Error ? e.message : JSON.stringify(e));
          resolve();
        },
        complete: () => resolve(),
      },
    );
    void until.then(() => {
      unsubscribe();
      resolve();
    });
  });
}

const TASK = `subscription BenchTask($taskId: ID!) {
  taskUpdates(taskId: $taskId) { __typename at ... on TaskProgressed { message } ... on TaskFailed { error } }
}`;
const SESSION = `subscription BenchSession($sessionId: ID!) {
  sessionEvents(sessionId: $sessionId) { __typename at ... on AssistantToken { text } }
}`;

interface Round {
  what: 'taskUpdates' | 'sessionEvents (baseline)';
  level: number;
  created: number;
  refused: number;
  broken: number;
  /** As the service reads them afterwards (tasks only). */
  completed: number;
  failed: number;
  unfinished: number;
  watches: Watch[];
  /** Subscriptions not seen open before the release. */
  unopened: number;
  reasons: Map<string, number>;
  seconds: number;
  /** CPU seconds from the release to the last watch's end: the service, and this process (tool service, provider, every client). */
  cpu: ReturnType<typeof cpuSince>;
}

/** CPU seconds (user + system) in a `/proc/.../stat` line. */
const statSeconds = (stat: string) => {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
};

/** CPU seconds used so far by the service (in all, and by each thread, by name and id), and by this process. */
function cpuNow() {
  const pid = parley.child.pid!;
  const threads = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    threads.set(
      Number(tid) === pid ? 'main thread' : `${stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))}#${tid}`,
      statSeconds(stat),
    );
  }
  const bench = process.cpuUsage();
  return { service: statSeconds(readFileSync(`/proc/${pid}/stat`, 'utf8')), threads, bench: (bench.user + bench.system) / 1e6 };
}
/** What was used since `start`; of the service's threads, the two busiest (its event loop, its database's). */
const cpuSince = (start: ReturnType<typeof cpuNow>) => {
  const now = cpuNow();
  const busiest = [...now.threads]
    .map(([thread, seconds]) => ({ thread, seconds: seconds - (start.threads.get(thread) ?? 0) }))
    .sort((a, b) => b.seconds - a.seconds)
    .slice(0, 2);
  return { service: now.service - start.service, busiest, bench: now.bench - start.bench };
};

/** Sends `requests` all at once; what came back, sorted into made, refused (an HTTP error) and broken (no answer). */
async function allAtOnce<T>(requests: (() => Promise<{ status: number; body: any }>)[], made: (body: any) => T) {
  const reasons = new Map<string, number>();
  const note = (reason: string) => reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
  const settled = await Promise.allSettled(requests.map((r) => r()));
  const out: (T | null)[] = settled.map((s) => {
    if (s.status === 'fulfilled' && s.value.status < 400) return made(s.value.body);
    note(
      s.status === 'rejected'
        ? `no answer: ${(s.reason as Error).message}`
        : `HTTP ${s.value.status} ${JSON.stringify(s.value.body).slice(0, 200)}`,
    );
    return null;
  });
  const refused = settled.filter((s) => s.status === 'fulfilled' && s.value.status >= 400).length;
  return { out, refused, broken: settled.filter((s) => s.status === 'rejected').length, reasons };
}

/** `level` users each create a task and watch it; the tool service then runs them all at once. */
async function taskRound(keys: string[], level: number, tag: string): Promise<Round> {
  tools.reset();
  const ids = Array.from({ length: level }, (_, i) => `${tag}-${i}`);
  const made = await allAtOnce(
    ids.map((id, i) => () => call(keys[i]!, 'POST', '/v2/tasks/create', { tool: 'bench_progress', args: { prompt: `bench ${id}` } })),
    (body) => body.task._id as string,
  );
  const before = await subscribers();
  const watches = ids.map(newWatch);
  const clients: Client[] = [];
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const following = made.out.map((taskId, i) => {
    if (!taskId) return Promise.resolve();
    const client = wsClient(keys[i]!);
    clients.push(client);
    const seen = new Set<number>();
    return follow<{ taskUpdates: { __typename: string; at: string; message?: string; error?: string } }>(
      client,
      TASK,
      { taskId },
      watches[i]!,
      stopped,
      ({ taskUpdates: e }) => {
        if (e.__typename === 'TaskProgressed')
          tally(watches[i]!, seen, Number(/^p(\d+)$/.exec(e.message ?? '')?.[1]), e.at, tools.sentAt.get(ids[i]!));
        else if (e.__typename === 'TaskCompleted') return 'end';
        else if (e.__typename === 'TaskFailed' || e.__typename === 'TaskCancelled') {
          watches[i]!.errors++;
          made.reasons.set(
            `task ended ${e.__typename}: ${e.error ?? ''}`,
            (made.reasons.get(`task ended ${e.__typename}: ${e.error ?? ''}`) ?? 0) + 1,
          );
          return 'end';
        }
        return undefined;
      },
    );
  });
  const created = made.out.filter(Boolean) as string[];
  const allOpen = await opened(before + created.length, 120_000);
  // Every task started (its call is at the tool service) before the progress begins.
  for (const until = Date.now() + 120_000; tools.arrived.size < created.length && Date.now() < until; ) await sleep(250);
  const unopened = allOpen ? 0 : before + created.length - (await subscribers());
  const began = performance.now();
  const cpuAtStart = cpuNow();
  tools.release((id) => (Number(id.slice(id.lastIndexOf('-') + 1)) * rampMs) / level);
  const timer = setTimeout(stop, deadlineMs);
  await Promise.all(following);
  clearTimeout(timer);
  const seconds = (performance.now() - began) / 1000;
  const cpu = cpuSince(cpuAtStart);
  await Promise.all(clients.map((c) => c.dispose()));
  await closed(before, 30_000);
  // How each task ended, as its owner reads it now.
  const statuses = await pooled(created, 16, async (taskId) => {
    const owner = keys[made.out.indexOf(taskId)]!;
    return (await call(owner, 'GET', `/v2/tasks/${taskId}`)).body?.task?.status as string | undefined;
  });
  return {
    what: 'taskUpdates',
    level,
    created: created.length,
    refused: made.refused,
    broken: made.broken,
    completed: statuses.filter((s) => s === 'completed').length,
    failed: statuses.filter((s) => s === 'failed' || s === 'cancelled').length,
    unfinished: statuses.filter((s) => s !== 'completed' && s !== 'failed' && s !== 'cancelled').length,
    watches: watches.filter((_, i) => made.out[i]),
    unopened,
    reasons: made.reasons,
    seconds,
    cpu,
  };
}

/** The baseline: `level` users each watch a session of theirs while a reply streams into it at the tasks' pace. */
async function sessionRound(keys: string[], agentId: string, level: number, tag: string): Promise<Round> {
  provider.sentAt.clear();
  const ids = Array.from({ length: level }, (_, i) => `${tag}-${i}`);
  // Making the sessions is not measured: a few at a time.
  const sessions = await pooled(ids, 16, async (_, i) => {
    const r = await call(keys[i]!, 'POST', '/v2/sessions', { agent_ids: [agentId] });
    if (r.status !== 200) throw new Error(`POST /v2/sessions: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.session_id as string;
  });
  const before = await subscribers();
  const watches = ids.map(newWatch);
  const clients: Client[] = [];
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const reasons = new Map<string, number>();
  const following = sessions.map((sessionId, i) => {
    const client = wsClient(keys[i]!);
    clients.push(client);
    const seen = new Set<number>();
    return follow<{ sessionEvents: { __typename: string; at: string; text?: string } }>(
      client,
      SESSION,
      { sessionId },
      watches[i]!,
      stopped,
      ({ sessionEvents: e }) => {
        if (e.__typename === 'AssistantToken')
          tally(watches[i]!, seen, Number(/^t(\d+) $/.exec(e.text ?? '')?.[1]), e.at, provider.sentAt.get(ids[i]!));
        else if (e.__typename === 'AssistantMessage') return 'end';
        else if (e.__typename === 'ReplyFailed') {
          watches[i]!.errors++;
          reasons.set('ReplyFailed', (reasons.get('ReplyFailed') ?? 0) + 1);
          return 'end';
        }
        return undefined;
      },
    );
  });
  const allOpen = await opened(before + level, 120_000);
  const unopened = allOpen ? 0 : before + level - (await subscribers());
  const began = performance.now();
  const cpuAtStart = cpuNow();
  const SEND = 'mutation BenchSend($input: SendMessageInput!) { sendMessage(input: $input) { promptId } }';
  const sent = await allAtOnce(
    sessions.map(
      (sessionId, i) => () =>
        sleep((i * rampMs) / level).then(() =>
          call(keys[i]!, 'POST', '/graphql', { query: SEND, variables: { input: { sessionId, content: `stream ${ids[i]}` } } }).then((r) =>
            r.body?.errors?.length ? { status: 400, body: r.body.errors } : r,
          ),
        ),
    ),
    () => true,
  );
  for (const [reason, n] of sent.reasons) reasons.set(reason, n);
  const timer = setTimeout(stop, deadlineMs);
  await Promise.all(following.filter((_, i) => sent.out[i]));
  clearTimeout(timer);
  stop();
  await Promise.all(following);
  const seconds = (performance.now() - began) / 1000;
  const cpu = cpuSince(cpuAtStart);
  await Promise.all(clients.map((c) => c.dispose()));
  await closed(before, 30_000);
  const created = sent.out.filter(Boolean).length;
  return {
    what: 'sessionEvents (baseline)',
    level,
    created,
    refused: sent.refused,
    broken: sent.broken,
    completed: watches.filter((w, i) => sent.out[i] && w.ended && !w.errors).length,
    failed: watches.filter((w, i) => sent.out[i] && w.errors).length,
    unfinished: watches.filter((w, i) => sent.out[i] && !w.ended).length,
    watches: watches.filter((_, i) => sent.out[i]),
    unopened,
    reasons,
    seconds,
    cpu,
  };
}

// ---- main --------------------------------------------------------------------------------------
const commit = (() => {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return process.env.BENCH_COMMIT ?? 'unknown';
  }
})();
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
console.log(
  `bench:tasks ${new Date().toISOString()} (${commit}); ${postgres ? 'PostgreSQL' : 'embedded database'}; ` +
    `${progressLines} progress updates per task ${intervalMs} ms apart; ${rounds} round(s) per level; load average ${load()}`,
);
const madeAt = Date.now();
const keys = await makeUsers(most);
console.log(
  `${most} users made with ${postgres ? '`parley keys create`' : "`parley keys create`'s command"} in ${((Date.now() - madeAt) / 1000).toFixed(1)} s; load average ${load()}`,
);
const agent = await call(keys[0]!, 'POST', '/graphql', {
  query: 'mutation { createAgent(input: { name: "Bench", key: "bench-tasks-agent", public: true }) { rawId } }',
});
const agentId = agent.body.data.createAgent.rawId as string;

// A warm-up of both (JIT, pools, caches), not counted.
await taskRound(keys, Math.min(10, most), 'warm');
await sessionRound(keys, agentId, Math.min(10, most), 'warm');

const results: Round[] = [];
for (const level of levels) {
  for (let r = 0; r < rounds; r++) {
    for (const round of [() => taskRound(keys, level, `t${level}r${r}`), () => sessionRound(keys, agentId, level, `s${level}r${r}`)]) {
      const result = await round();
      results.push(result);
      const received = result.watches.reduce((n, w) => n + w.received, 0);
      console.log(
        `  round ${r + 1} ${result.what.padEnd(24)} ${String(level).padStart(5)}: ${result.created} created, ${result.refused} refused, ${result.broken} broken; ` +
          `${received}/${result.created * progressLines} updates in ${result.seconds.toFixed(1)} s; ` +
          `CPU: service ${result.cpu.service.toFixed(1)} s (${result.cpu.busiest.map((b) => `${b.thread} ${b.seconds.toFixed(1)} s`).join(', ')}), this process ${result.cpu.bench.toFixed(1)} s; ` +
          `${result.unopened} watches not open at the release; load average ${load()}`,
      );
      for (const [reason, n] of result.reasons) console.log(`    ${n} × ${reason}`);
    }
  }
}

console.log(
  '\nlevel  watched                   created refused broken completed failed unfinished | watchers whole no end  lost reordered duplicated | p50 ms  p99 ms  p50 vs base  p99 vs base | to the bus p50/p99 ms | service CPU ms per update',
);
let failing = false;
for (const level of levels) {
  const of = (what: Round['what']) => results.filter((r) => r.level === level && r.what === what);
  const baseLatencies = of('sessionEvents (baseline)').flatMap((r) => r.watches.flatMap((w) => w.latencies));
  const [b50, b99] = [quantile(baseLatencies, 0.5), quantile(baseLatencies, 0.99)];
  for (const what of ['taskUpdates', 'sessionEvents (baseline)'] as const) {
    const rs = of(what);
    const sum = (f: (r: Round) => number) => rs.reduce((n, r) => n + f(r), 0);
    const watches = rs.flatMap((r) => r.watches);
    const whole = watches.filter(
      (w) => w.received === progressLines && w.ended && !w.reordered && !w.duplicated && !w.errors && !w.broken,
    ).length;
    const lost = watches.reduce((n, w) => n + progressLines - w.received, 0);
    const latencies = watches.flatMap((w) => w.latencies);
    const [p50, p99] = [quantile(latencies, 0.5), quantile(latencies, 0.99)];
    const published = watches.flatMap((w) => w.published);
    const asked = level * rs.length;
    const faults =
      sum((r) => r.refused + r.broken + r.failed + r.unfinished) +
      lost +
      watches.reduce((n, w) => n + w.reordered + w.duplicated + w.errors + Number(w.broken) + Number(!w.ended), 0) +
      (asked - sum((r) => r.created));
    if (faults) failing = true;
    console.log(
      `${String(level).padStart(5)}  ${what.padEnd(24)} ${String(sum((r) => r.created)).padStart(8)} ${String(sum((r) => r.refused)).padStart(7)} ${String(sum((r) => r.broken)).padStart(6)} ` +
        `${String(sum((r) => r.completed)).padStart(9)} ${String(sum((r) => r.failed)).padStart(6)} ${String(sum((r) => r.unfinished)).padStart(10)} | ` +
        `${`${whole}/${watches.length}`.padStart(14)} ${String(watches.filter((w) => !w.ended).length).padStart(6)} ${String(lost).padStart(5)} ${String(watches.reduce((n, w) => n + w.reordered, 0)).padStart(9)} ${String(watches.reduce((n, w) => n + w.duplicated, 0)).padStart(10)} | ` +
        `${p50.toFixed(1).padStart(6)} ${p99.toFixed(1).padStart(7)} ${`${(p50 / b50).toFixed(2)}×`.padStart(12)} ${`${(p99 / b99).toFixed(2)}×`.padStart(12)} | ${`${Math.max(0, quantile(published, 0.5)).toFixed(0)}/${Math.max(0, quantile(published, 0.99)).toFixed(0)}`.padStart(18)} | ${(
          (sum((r) => r.cpu.service) * 1000) /
          Math.max(
            1,
            watches.reduce((n, w) => n + w.received, 0),
          )
        )
          .toFixed(2)
          .padStart(25)}`,
    );
  }
}
console.log(`load average at the end ${load()}`);
tools.close();
provider.close();
await stopAll();
if (failing) console.log('\nFAILING: tasks or replies refused, broken, failed or unfinished, or updates lost, reordered or duplicated');
process.exit(failing ? 1 : 0);
