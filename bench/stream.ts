// Streaming benchmark: many concurrent replies streamed by a paced fake provider through parley
// (REST SSE and graphql-ws) and, in the same run, through a bare pass-through relay (the floor of
// this machine). Reports added latency per token (provider write → client receive), throughput,
// lost or reordered tokens, and server memory per open stream and per idle subscription.
// Two more floors on request: the bare relay over graphql-ws (`relayws`) and a relay that also
// stores each conversation in an embedded database (`store`); ratios stay against the bare SSE relay.
//   npm run bench:stream [-- --levels 100,1000 --tokens 60 --rate 20 --rounds 3 --ramp 2000 --idle 10000 --database postgres
//                           --transports relay,relayws,store,sse,ws]
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import {
  deadline,
  faults,
  median,
  newResult,
  quantile,
  root,
  rssKb,
  sleep,
  sseStream,
  start,
  startPacedProvider,
  stopAll,
  tally,
  type StreamResult,
} from './streaming.ts';
import { newDatabaseOn } from '../test/helpers/database.ts';
import { startPostgresCluster } from '../test/helpers/servers.ts';
import { serveArgs } from '../test/helpers/service-command.ts';

const { values } = parseArgs({
  options: {
    levels: { type: 'string', default: '100,1000' },
    tokens: { type: 'string', default: '60' },
    rate: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '3' },
    ramp: { type: 'string', default: '2000' },
    idle: { type: 'string', default: '10000' },
    /** A stream without its end frame this long after it started counts as hung. */
    deadline: { type: 'string', default: '120000' },
    /** Write a CPU profile of the parley server into this directory. */
    profile: { type: 'string' },
    transports: { type: 'string', default: 'relay,sse,ws' },
    /** `pglite` (the embedded default) or `postgres` (a throwaway PostgreSQL cluster started for the run). */
    database: { type: 'string', default: 'pglite' },
  },
});
const levels = values.levels!.split(',').map(Number);
const tokens = Number(values.tokens);
const rate = Number(values.rate);
const rounds = Number(values.rounds);
const ramp = Number(values.ramp);
const idleSubscriptions = Number(values.idle);
const deadlineMs = Number(values.deadline);

const SEND = `subscription Bench($input: SendMessageInput!) { sendMessage(input: $input) { __typename ... on AssistantToken { text } } }`;

function wsStream(client: Client, agentId: string, id: string, result: StreamResult) {
  const expect = { next: 0 };
  const abort = new AbortController();
  const cancel = deadline(deadlineMs, abort);
  result.startedAt = performance.now();
  return new Promise<void>((resolve) => {
    const unsubscribe = client.subscribe<{ sendMessage: { __typename: string; text?: string } }>(
      { query: SEND, variables: { input: { agentIds: [agentId], content: `stream ${id}` } } },
      {
        next: (r) => {
          if (r.errors?.length || r.data?.sendMessage.__typename === 'ReplyFailed') result.errors++;
          else if (r.data?.sendMessage.__typename === 'AssistantToken')
            tally(provider.sentAt, result, id, r.data.sendMessage.text!, expect);
        },
        error: (e) => {
          result.failed = true;
          console.error('graphql-ws stream failed', e);
          cancel();
          resolve();
        },
        complete: () => {
          result.ended = !abort.signal.aborted;
          cancel();
          resolve();
        },
      },
    );
    // A hung stream is given up at the deadline (counted as having no end frame).
    abort.signal.addEventListener('abort', () => {
      unsubscribe();
      resolve();
    });
  });
}

/** CPU seconds used so far by each thread of a process, by thread id (from /proc). */
async function threadCpu(pid: number): Promise<Map<string, { name: string; seconds: number }>> {
  const { readdir } = await import('node:fs/promises');
  const out = new Map<string, { name: string; seconds: number }>();
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    out.set(tid, { name, seconds: (Number(fields[11]) + Number(fields[12])) / 100 });
  }
  return out;
}

/**
 * CPU seconds used so far by a process group: a PostgreSQL cluster started for the run (its
 * postmaster and every backend; a backend that ended is counted in its postmaster's reaped time).
 */
async function groupCpu(pgid: number): Promise<number> {
  const { readdir } = await import('node:fs/promises');
  let seconds = 0;
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) !== pgid) continue;
    seconds += (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / 100;
  }
  return seconds;
}

// ---- one run -----------------------------------------------------------------------------------
type Transport = 'relay (SSE)' | 'relay (graphql-ws)' | 'relay+store (SSE)' | 'parley REST SSE' | 'parley graphql-ws';

interface Run {
  transport: Transport;
  level: number;
  latencies: number[];
  expected: number;
  received: number;
  reordered: number;
  throughput: number;
  memoryPerStreamKb: number;
  /** Time to first token of each stream (request sent → first token received), ms. */
  firstToken: number[];
  failed: number;
  unended: number;
  errors: number;
  /** The server's busiest threads during the run (CPU seconds): the event loop, the database. */
  busiest: { tid: string; name: string; seconds: number }[];
  /** The server process's CPU seconds during the run, every thread together. */
  serverCpu: number;
  /** On PostgreSQL: the CPU seconds its cluster (every backend) used during the run, whichever transport ran. */
  databaseCpu: number | null;
  /** This process (the paced provider and every client): CPU seconds, and its event loop's delay p50/p99 in ms. */
  bench: { seconds: number; delayP50: number; delayP99: number };
}

interface Context {
  relayUrl: string;
  parleyUrl: string;
  key: string;
  agentId: string;
  parleyPid: number;
  relayPid: number;
  /** The relay that also stores conversations (`--transports store`), when it runs. */
  storing: { url: string; pid: number } | null;
}

async function run(transport: Transport, level: number, ctx: Context): Promise<Run> {
  provider.sentAt.clear();
  const results: StreamResult[] = [];
  const pid = transport.startsWith('relay (') ? ctx.relayPid : transport === 'relay+store (SSE)' ? ctx.storing!.pid : ctx.parleyPid;
  const before = await rssKb(pid);
  const cpuBefore = await threadCpu(pid);
  const clusterBefore = postgres ? await groupCpu(postgres.child.pid!) : null;
  const benchCpu = process.cpuUsage();
  const benchDelay = monitorEventLoopDelay({ resolution: 1 });
  benchDelay.enable();
  let peak = before;
  const sampler = setInterval(() => void rssKb(pid).then((kb) => (peak = Math.max(peak, kb))), 200);
  const prefix = `${transport.length}-${level}-${Math.random().toString(36).slice(2, 7)}`;
  const clients: Client[] = [];
  const streams = Array.from({ length: level }, async (_, k) => {
    await sleep((k * ramp) / level);
    const id = `${prefix}-${k}`;
    const result = newResult();
    results.push(result);
    if (transport === 'relay (SSE)' || transport === 'relay+store (SSE)') {
      const url = transport === 'relay (SSE)' ? ctx.relayUrl : ctx.storing!.url;
      return sseStream(provider.sentAt, url, {}, { content: `stream ${id}` }, id, result, deadlineMs);
    }
    if (transport === 'parley REST SSE') {
      return sseStream(
        provider.sentAt,
        `${ctx.parleyUrl}/v2/sessions`,
        { 'x-api-key': ctx.key },
        { agent_ids: [ctx.agentId], content: `stream ${id}`, stream: true },
        id,
        result,
        deadlineMs,
      );
    }
    const client = createClient({
      url: `${(transport === 'relay (graphql-ws)' ? ctx.relayUrl.slice(0, -1) : ctx.parleyUrl).replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { 'X-Api-Key': ctx.key },
      retryAttempts: 0,
    });
    clients.push(client);
    return wsStream(client, ctx.agentId, id, result);
  });
  await Promise.all(streams);
  clearInterval(sampler);
  const cpuAfter = await threadCpu(pid);
  const databaseCpu = clusterBefore === null ? null : (await groupCpu(postgres!.child.pid!)) - clusterBefore;
  benchDelay.disable();
  const benchUsed = process.cpuUsage(benchCpu);
  const serverCpu = [...cpuAfter].reduce((sum, [tid, t]) => sum + t.seconds - (cpuBefore.get(tid)?.seconds ?? 0), 0);
  const busiest = [...cpuAfter]
    .map(([tid, t]) => ({ tid, name: t.name, seconds: t.seconds - (cpuBefore.get(tid)?.seconds ?? 0) }))
    .sort((a, b) => b.seconds - a.seconds)
    .slice(0, 3);
  await Promise.all(clients.map((c) => c.dispose()));
  const first = Math.min(...results.map((r) => r.firstAt));
  const last = Math.max(...results.map((r) => r.lastAt));
  const received = results.reduce((n, r) => n + r.received, 0);
  return {
    transport,
    level,
    latencies: results.flatMap((r) => r.latencies),
    expected: level * tokens,
    received,
    reordered: results.reduce((n, r) => n + r.reordered, 0),
    throughput: received / ((last - first) / 1000),
    memoryPerStreamKb: (peak - before) / level,
    firstToken: results.filter((r) => r.received > 0).map((r) => r.firstAt - r.startedAt),
    ...faults(results),
    busiest,
    serverCpu,
    databaseCpu,
    bench: {
      seconds: (benchUsed.user + benchUsed.system) / 1e6,
      delayP50: benchDelay.percentile(50) / 1e6,
      delayP99: benchDelay.percentile(99) / 1e6,
    },
  };
}

/** Opens `count` idle sessionEvents subscriptions over 100 sockets; server memory per subscription. */
async function idleCost(count: number, ctx: { parleyUrl: string; key: string; agentId: string; parleyPid: number }) {
  const sessions: string[] = [];
  for (let i = 0; i < 100; i++) {
    const r = await fetch(`${ctx.parleyUrl}/v2/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': ctx.key },
      body: JSON.stringify({ agent_ids: [ctx.agentId] }),
    });
    sessions.push(((await r.json()) as { session_id: string }).session_id);
  }
  await sleep(2000);
  const before = await rssKb(ctx.parleyPid);
  const sockets = Array.from({ length: 100 }, () =>
    createClient({
      url: `${ctx.parleyUrl.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { 'X-Api-Key': ctx.key },
      retryAttempts: 0,
      lazy: false,
    }),
  );
  const unsubscribe: (() => void)[] = [];
  for (let i = 0; i < count; i++) {
    const socket = sockets[i % sockets.length]!;
    unsubscribe.push(
      socket.subscribe(
        { query: `subscription { sessionEvents(sessionId: "${sessions[i % sessions.length]}") { seq } }` },
        { next: () => {}, error: (e) => console.error('idle subscription failed', e), complete: () => {} },
      ),
    );
  }
  const health = await fetch(`${ctx.parleyUrl}/healthz`);
  await health.text();
  // Subscriptions register as the server works through them; wait until memory settles.
  let after = await rssKb(ctx.parleyPid);
  for (let stable = 0; stable < 3; ) {
    await sleep(1000);
    const now = await rssKb(ctx.parleyPid);
    stable = Math.abs(now - after) < 512 ? stable + 1 : 0;
    after = now;
  }
  unsubscribe.forEach((u) => u());
  await Promise.all(sockets.map((s) => s.dispose()));
  return (after - before) / count;
}

// ---- main --------------------------------------------------------------------------------------
const provider = await startPacedProvider(tokens, rate);
const providerUrl = provider.url;

const dataDir = await mkdtemp(join(tmpdir(), 'parley-bench-'));
const postgres = values.database === 'postgres' ? await startPostgresCluster() : null;
process.on('exit', () => postgres?.stop());
const databaseUrl: Record<string, string> = postgres ? { DATABASE_URL: (await newDatabaseOn(postgres.url)).url } : {};
// One key stands for every client here: no rate limit, and room for every stream.
const unlimited = {
  RATE_LIMIT_FREE: '0',
  MAX_STREAMS_PER_KEY: '1000000',
  MAX_SUBSCRIPTIONS_PER_KEY: '1000000',
  WS_MAX_SOCKETS_PER_KEY: '1000000',
  GRAPHQL_IN_FLIGHT_PER_KEY: '1000000',
};
const env = {
  NODE_ENV: 'production',
  DATA_DIR: dataDir,
  ...databaseUrl,
  LOG_LEVEL: 'warn',
  LLM_BASE_URL: providerUrl,
  PORT: '0',
  HOST: '127.0.0.1',
  ...unlimited,
};
const keys = await new Promise<string>((resolve, reject) => {
  const c = spawn(process.execPath, ['bin/parley.js', 'keys', 'create', 'bench', '--json'], { cwd: root, env: { ...process.env, ...env } });
  let out = '';
  c.stdout.on('data', (d) => (out += d));
  c.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`keys create failed: ${out}`))));
});
const key = (JSON.parse(keys) as { apiKey: string }).apiKey;
const profiling = values.profile ? ['--cpu-prof', `--cpu-prof-dir=${values.profile}`] : [];
const parley = await start([...profiling, ...serveArgs()], env, /parley listening on (http:\/\/[\d.:]+)/);
const relay = await start([...profiling, '--import', 'tsx', 'bench/relay.ts', providerUrl], {}, /relay listening on (\d+)/);
const parleyUrl = parley.match[1]!;
const relayUrl = `http://127.0.0.1:${relay.match[1]}/`;
const created = await fetch(`${parleyUrl}/graphql`, {
  method: 'POST',
  headers: { 'content-type': 'application/json', 'x-api-key': key },
  body: JSON.stringify({ query: 'mutation { createAgent(input: { name: "Bench", key: "bench-agent", public: true }) { rawId } }' }),
});
const agentId = ((await created.json()) as { data: { createAgent: { rawId: string } } }).data.createAgent.rawId;
const named: Record<string, Transport> = {
  relay: 'relay (SSE)',
  relayws: 'relay (graphql-ws)',
  store: 'relay+store (SSE)',
  sse: 'parley REST SSE',
  ws: 'parley graphql-ws',
};
const transports = values.transports!.split(',').map((t) => named[t]!);
// The relay that also stores each conversation runs only when asked for, with a database of its own.
const storeDir = transports.includes('relay+store (SSE)') ? await mkdtemp(join(tmpdir(), 'parley-bench-relay-')) : null;
const storing = storeDir
  ? await start([...profiling, '--import', 'tsx', 'bench/relay.ts', providerUrl, '--store', storeDir], {}, /relay listening on (\d+)/)
  : null;
const ctx: Context = {
  relayUrl,
  parleyUrl,
  key,
  agentId,
  parleyPid: parley.child.pid!,
  relayPid: relay.child.pid!,
  storing: storing && { url: `http://127.0.0.1:${storing.match[1]}/`, pid: storing.child.pid! },
};
// Measured first, on a server whose heap has not yet grown and freed room for thousands of
// streams (afterwards new subscriptions fit in that room and RSS does not move).
const perSubscription = idleSubscriptions > 0 ? await idleCost(idleSubscriptions, ctx) : null;
const runs: Run[] = [];
console.log(
  `${tokens} tokens per stream at ${rate}/s, starts spread over ${ramp} ms, ${rounds} alternating rounds per level, on ${postgres ? 'PostgreSQL' : 'the embedded database'}\n`,
);
for (const level of levels) {
  await run('parley REST SSE', Math.min(level, 50), ctx); // warm-up: JIT, connection pools, caches
  for (let r = 0; r < rounds; r++) {
    for (const transport of transports) {
      const result = await run(transport, level, ctx);
      runs.push(result);
      const threads = result.busiest.map((b) => `${b.name}#${b.tid} ${b.seconds.toFixed(1)}s`).join(', ');
      const cluster = result.databaseCpu === null ? '' : `; PostgreSQL processes ${result.databaseCpu.toFixed(1)}s`;
      console.log(
        `  round ${r + 1} ${transport.padEnd(18)} ${String(level).padStart(5)} streams: ${result.received}/${result.expected} tokens, ${result.reordered} reordered, ${result.failed} failed, ${result.unended} without end frame, ${result.errors} error frames; first token p50 ${median(result.firstToken).toFixed(0)} ms; server ${result.serverCpu.toFixed(1)}s of CPU, busiest threads: ${threads}${cluster}; this process ${result.bench.seconds.toFixed(1)}s, loop delay p50/p99 ${result.bench.delayP50.toFixed(1)}/${result.bench.delayP99.toFixed(1)} ms`,
      );
    }
  }
}

console.log(
  '\nlevel  transport           p50 ms  p99 ms  p50 vs relay  1st token p50/p99 ms  vs relay  tokens/s  vs relay  lost  reordered  KB/stream',
);
let failing = false;
for (const level of levels) {
  const of = (t: Transport) => runs.filter((r) => r.level === level && r.transport === t);
  const floor = of('relay (SSE)');
  const floorP50 = quantile(
    floor.flatMap((r) => r.latencies),
    0.5,
  );
  const floorFirst = median(floor.flatMap((r) => r.firstToken));
  const floorTput = median(floor.map((r) => r.throughput));
  for (const transport of transports) {
    const rs = of(transport);
    const lat = rs.flatMap((r) => r.latencies);
    const first = rs.flatMap((r) => r.firstToken);
    const p50 = quantile(lat, 0.5);
    const tput = median(rs.map((r) => r.throughput));
    const lost = rs.reduce((n, r) => n + r.expected - r.received, 0);
    const reordered = rs.reduce((n, r) => n + r.reordered, 0);
    const failed = rs.reduce((n, r) => n + r.failed, 0);
    const unended = rs.reduce((n, r) => n + r.unended, 0);
    const errors = rs.reduce((n, r) => n + r.errors, 0);
    const label = `${String(level).padStart(5)}  ${transport.padEnd(18)}`;
    // Speed means nothing for a run that lost work: it is reported as failing, not as a ratio.
    if (failed || unended || errors || lost || reordered) {
      failing = true;
      console.log(
        `${label} FAILING: ${failed} failed, ${unended} without end frame, ${errors} error frames, ${lost} tokens lost, ${reordered} reordered`,
      );
      continue;
    }
    console.log(
      `${label} ${p50.toFixed(2).padStart(7)} ${quantile(lat, 0.99).toFixed(2).padStart(7)} ${(p50 / floorP50).toFixed(2).padStart(12)}× ${`${median(first).toFixed(0)}/${quantile(first, 0.99).toFixed(0)}`.padStart(20)} ${(median(first) / floorFirst).toFixed(2).padStart(8)}× ${tput.toFixed(0).padStart(9)} ${(tput / floorTput).toFixed(2).padStart(8)}× ${String(lost).padStart(5)} ${String(reordered).padStart(10)} ${median(
        rs.map((r) => r.memoryPerStreamKb),
      )
        .toFixed(1)
        .padStart(10)}`,
    );
  }
}
if (perSubscription !== null) {
  console.log(
    `\n${idleSubscriptions} idle graphql-ws subscriptions over 100 sockets: ${perSubscription.toFixed(1)} KB of server memory each (RSS)`,
  );
}

provider.close();
await stopAll();
await rm(dataDir, { recursive: true, force: true });
if (storeDir) await rm(storeDir, { recursive: true, force: true });
if (failing) console.log('\nFAILING: some replies failed, hung, errored, or lost tokens');
process.exit(failing ? 1 : 0);
