// Scale benchmark: the same paced streams through one parley instance (in-process events) and
// through two instances sharing PostgreSQL and Redis, in interleaved rounds of the same run, so
// the ratio shows what going through Redis costs. Then a kill: clients watch on a third instance
// while replies are written on another; that instance is SIGKILLed mid-reply and each client
// resumes on a survivor with `after`. Lost and duplicated tokens are counted.
//   npm run bench:scale [-- --streams 200 --tokens 40 --rate 20 --rounds 3 --watchers 100 --profile <dir>]
// (`--profile` writes V8 CPU profiles of every instance's threads.)
// PostgreSQL and Redis are started for the run (Debian's postgresql and redis-server packages).
import { parseArgs } from 'node:util';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { newDatabaseOn } from '../test/helpers/database.ts';
import { startPostgresCluster, startRedisServer } from '../test/helpers/servers.ts';
import { serveArgs } from '../test/helpers/service-command.ts';
import {
  faults,
  median,
  newResult,
  quantile,
  sleep,
  sseStream,
  start,
  startPacedProvider,
  stopAll,
  tally,
  type StreamResult,
} from './streaming.ts';

const { values } = parseArgs({
  options: {
    streams: { type: 'string', default: '200' },
    tokens: { type: 'string', default: '40' },
    rate: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '3' },
    ramp: { type: 'string', default: '1000' },
    watchers: { type: 'string', default: '100' },
    profile: { type: 'string' },
  },
});
const streams = Number(values.streams);
const tokens = Number(values.tokens);
const rate = Number(values.rate);
const rounds = Number(values.rounds);
const ramp = Number(values.ramp);
const watchers = Number(values.watchers);

const postgres = await startPostgresCluster();
const redis = await startRedisServer();
const provider = await startPacedProvider(tokens, rate);
process.on('exit', () => {
  postgres.stop();
  redis.stop();
});

interface Deployment {
  urls: string[];
  pids: number[];
  key: string;
  agentId: string;
  env: Record<string, string>;
}

async function instance(env: Record<string, string>) {
  const profiling = values.profile ? ['--cpu-prof', `--cpu-prof-dir=${values.profile}`] : [];
  const { child, match } = await start([...profiling, ...serveArgs()], { ...env, PORT: '0' }, /parley listening on (http:\/\/[\d.:]+)/);
  return { url: match[1]!, child };
}

async function deploy(count: number, env: Record<string, string>): Promise<Deployment> {
  const cli = await start(['bin/parley.js', 'keys', 'create', 'bench', '--json'], env, /"apiKey":\s*"([^"]+)"/);
  const key = cli.match[1]!;
  const started = [];
  for (let i = 0; i < count; i++) started.push(await instance(env));
  const created = await fetch(`${started[0]!.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ query: 'mutation { createAgent(input: { name: "Bench", key: "bench-agent", public: true }) { rawId } }' }),
  });
  const agentId = ((await created.json()) as { data: { createAgent: { rawId: string } } }).data.createAgent.rawId;
  return { urls: started.map((s) => s.url), pids: started.map((s) => s.child.pid!), key, agentId, env };
}

// One key stands for every client here: no rate limit, and room for every stream and socket.
const unlimited = {
  RATE_LIMIT_FREE: '0',
  MAX_STREAMS_PER_KEY: '1000000',
  MAX_SUBSCRIPTIONS_PER_KEY: '1000000',
  WS_MAX_SOCKETS_PER_KEY: '1000000',
  GRAPHQL_IN_FLIGHT_PER_KEY: '1000000',
};
const base = { NODE_ENV: 'production', LOG_LEVEL: 'warn', LLM_BASE_URL: provider.url, HOST: '127.0.0.1', ...unlimited };
const single = await deploy(1, { ...base, DATABASE_URL: (await newDatabaseOn(postgres.url)).url });
const shared = await deploy(2, { ...base, DATABASE_URL: (await newDatabaseOn(postgres.url)).url, REDIS_URL: redis.url });

/** `streams` REST SSE replies, spread over the deployment's instances in turn. */
async function round(d: Deployment, label: string) {
  provider.sentAt.clear();
  const results: StreamResult[] = [];
  await Promise.all(
    Array.from({ length: streams }, async (_, k) => {
      await sleep((k * ramp) / streams);
      const id = `${label}-${Math.random().toString(36).slice(2, 8)}-${k}`;
      const result = newResult();
      results.push(result);
      const url = d.urls[k % d.urls.length]!;
      await sseStream(
        provider.sentAt,
        `${url}/v2/sessions`,
        { 'x-api-key': d.key },
        { agent_ids: [d.agentId], content: `stream ${id}`, stream: true },
        id,
        result,
      );
    }),
  );
  const first = Math.min(...results.map((r) => r.firstAt));
  const last = Math.max(...results.map((r) => r.lastAt));
  const received = results.reduce((n, r) => n + r.received, 0);
  return {
    latencies: results.flatMap((r) => r.latencies),
    firstToken: results.filter((r) => r.received > 0).map((r) => r.firstAt - r.startedAt),
    received,
    lost: streams * tokens - received,
    duplicated: results.reduce((n, r) => n + r.duplicated, 0),
    reordered: results.reduce((n, r) => n + r.reordered, 0),
    throughput: received / ((last - first) / 1000),
    ...faults(results),
  };
}

console.log(`${streams} streams of ${tokens} tokens at ${rate}/s per round, ${rounds} interleaved rounds\n`);
await round(single, 'warm');
await round(shared, 'warm');
const runs: Record<'one instance' | 'two instances + Redis', Awaited<ReturnType<typeof round>>[]> = {
  'one instance': [],
  'two instances + Redis': [],
};
for (let r = 0; r < rounds; r++) {
  for (const [label, d] of [
    ['one instance', single],
    ['two instances + Redis', shared],
  ] as const) {
    const result = await round(d, label.replace(/\W+/g, ''));
    runs[label].push(result);
    console.log(
      `  round ${r + 1} ${label.padEnd(22)} ${result.received}/${streams * tokens} tokens, ${result.duplicated} duplicated, ${result.reordered} reordered, ${result.failed} failed, ${result.unended} without end frame, ${result.errors} error frames, first token p50 ${median(result.firstToken).toFixed(0)} ms, ${result.throughput.toFixed(0)} tokens/s`,
    );
  }
}
const baseline = runs['one instance'];
const baseP50 = quantile(
  baseline.flatMap((r) => r.latencies),
  0.5,
);
const baseTput = median(baseline.map((r) => r.throughput));
let failing = false;
console.log('\ndeployment               p50 ms  p99 ms  p50 ratio  1st token p50 ms  tokens/s  ratio  lost  duplicated');
for (const [label, rs] of Object.entries(runs)) {
  const lat = rs.flatMap((r) => r.latencies);
  const tput = median(rs.map((r) => r.throughput));
  const broken = ['failed', 'unended', 'errors', 'lost', 'duplicated', 'reordered'] as const;
  const counts = broken.map((k) => [k, rs.reduce((n, r) => n + r[k], 0)] as const);
  // A deployment that lost or broke work is failing, whatever its speed.
  if (counts.some(([, n]) => n > 0)) {
    failing = true;
    console.log(`${label.padEnd(22)} FAILING: ${counts.map(([k, n]) => `${n} ${k}`).join(', ')}`);
    continue;
  }
  console.log(
    `${label.padEnd(22)} ${quantile(lat, 0.5).toFixed(2).padStart(7)} ${quantile(lat, 0.99).toFixed(2).padStart(7)} ${(quantile(lat, 0.5) / baseP50).toFixed(2).padStart(9)}× ${median(
      rs.flatMap((r) => r.firstToken),
    )
      .toFixed(0)
      .padStart(
        17,
      )} ${tput.toFixed(0).padStart(9)} ${(tput / baseTput).toFixed(2).padStart(5)}× ${String(rs.reduce((n, r) => n + r.lost, 0)).padStart(5)} ${String(rs.reduce((n, r) => n + r.duplicated, 0)).padStart(11)}`,
  );
}

// ---- the kill ------------------------------------------------------------------------------------
const EVENTS = `subscription($sessionId: ID!, $after: Seq) { sessionEvents(sessionId: $sessionId, after: $after) { __typename seq ... on AssistantToken { text } } }`;
const victim = await instance(shared.env);
const clients: Client[] = [];
const ws = (url: string) => {
  const client = createClient({
    url: `${url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { 'X-Api-Key': shared.key },
    retryAttempts: 0,
  });
  clients.push(client);
  return client;
};

interface Watcher {
  id: string;
  sessionId: string;
  lastSeq: number | undefined;
  /** Saw its prompt end: nothing is left to resume. */
  ended: boolean;
  result: StreamResult;
  expect: { next: number };
  done: Promise<void>;
}

/** Watches a session until its prompt ends; resolves early (with what it has) if the socket dies. */
function follow(w: Watcher, url: string) {
  w.done = new Promise<void>((resolve) => {
    const stop = ws(url).subscribe<{ sessionEvents: { __typename: string; seq: number; text?: string } }>(
      { query: EVENTS, variables: { sessionId: w.sessionId, after: w.lastSeq } },
      {
        next: (r) => {
          const e = r.data?.sessionEvents;
          if (!e) return;
          w.lastSeq = e.seq;
          if (e.__typename === 'AssistantToken') tally(provider.sentAt, w.result, w.id, e.text!, w.expect);
          if (e.__typename === 'PromptEnded') {
            w.ended = true;
            stop();
            resolve();
          }
        },
        error: () => resolve(),
        complete: () => resolve(),
      },
    );
  });
}

provider.sentAt.clear();
const SEND = `mutation($input: SendMessageInput!) { sendMessage(input: $input) { seq session { id } } }`;
const watched: Watcher[] = await Promise.all(
  Array.from({ length: watchers }, async (_, k) => {
    const id = `kill-${k}`;
    const sent = await fetch(`${shared.urls[0]}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': shared.key },
      body: JSON.stringify({ query: SEND, variables: { input: { agentIds: [shared.agentId], content: `stream ${id}` } } }),
    });
    const answer = (await sent.json()) as { data?: { sendMessage: { seq: number; session: { id: string } } }; errors?: unknown };
    if (!answer.data) throw new Error(`sendMessage was refused: ${JSON.stringify(answer.errors)}`);
    const { seq, session } = answer.data.sendMessage;
    // From just before the prompt: the whole reply, however late the subscription takes effect.
    const w: Watcher = {
      id,
      sessionId: session.id,
      lastSeq: seq - 1,
      ended: false,
      result: newResult(),
      expect: { next: 0 },
      done: Promise.resolve(),
    };
    follow(w, victim.url);
    return w;
  }),
);
// Killed when about half of every reply has reached its watchers.
while (watched.reduce((n, w) => n + w.result.received, 0) < (watchers * tokens) / 2) await sleep(20);
victim.child.kill('SIGKILL');
const seenAtKill = watched.reduce((n, w) => n + w.result.received, 0);
await Promise.all(watched.map((w) => w.done));
for (const [i, w] of watched.entries()) if (!w.ended) follow(w, shared.urls[i % 2]!);
await Promise.all(watched.map((w) => w.done));
const received = watched.reduce((n, w) => n + w.result.received, 0);
const duplicated = watched.reduce((n, w) => n + w.result.duplicated, 0);
const unique = watched.reduce((n, w) => n + w.expect.next, 0);
console.log(
  `\nkill: ${watchers} clients watching on an instance killed after ${seenAtKill} of ${watchers * tokens} tokens; resumed with after on the other two: ` +
    `${watchers * tokens - unique} lost, ${duplicated} duplicated, ${watched.reduce((n, w) => n + w.result.reordered, 0)} out of order (${received} token events received)`,
);

await Promise.all(clients.map((c) => Promise.resolve(c.dispose()).catch(() => {})));
provider.close();
await stopAll();
if (failing || watchers * tokens - unique > 0) console.log('\nFAILING: some replies failed, hung, errored, or lost tokens');
process.exit(failing || watchers * tokens - unique > 0 ? 1 : 0);
