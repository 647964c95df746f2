// Measures request throughput of the whole service on loopback and reports each scenario as a
// ratio to a baseline measured in the same run (GET /healthz: routing plus one `SELECT 1`).
// Absolute numbers on a shared machine mean little; ratios between interleaved rounds do.
//   npm run bench [-- --rounds 5 --requests 300 --concurrency 8]
import { parseArgs } from 'node:util';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { loadDemo } from '../src/demo/load.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    requests: { type: 'string', default: '300' },
    concurrency: { type: 'string', default: '8' },
  },
});
const rounds = Number(values.rounds);
const requests = Number(values.requests);
const concurrency = Number(values.concurrency);

// One key makes thousands of requests here: rate limits off (their cost: bench/limits.ts).
const unlimited = { RATE_LIMIT_DEFAULT: '0', RATE_LIMIT_FREE: '0', RATE_LIMIT_PRO: '0' };
const app = await buildApp({
  ...loadConfig({ LOG_LEVEL: 'silent', ...unlimited }),
  port: 0,
  database: { kind: 'pglite', dataDir: undefined },
});
const url = await app.http.listen({ port: 0, host: '127.0.0.1' });
const manifest = await loadDemo(app.services);
const key = manifest.users[0]!.apiKey;
const agentId = manifest.agents[0]!.id;

const graphql = (query: string) => ({ method: 'POST', path: '/graphql', body: JSON.stringify({ query }) });
const scenarios: Record<string, { method: string; path: string; body?: string }> = {
  'GET /healthz (baseline)': { method: 'GET', path: '/healthz' },
  'REST GET /v2/creators/me': { method: 'GET', path: '/v2/creators/me' },
  'GraphQL me { username balance }': graphql('{ me { username balance } }'),
  'REST GET /v2/agents/:id': { method: 'GET', path: `/v2/agents/${agentId}` },
  'GraphQL agent(id) { key name owner { username } }': graphql(`{ agent(id: "${agentId}") { key name owner { username } } }`),
  'REST GET /v2/tools': { method: 'GET', path: '/v2/tools' },
  'GraphQL 50 creations + creator + agent + likedByMe': graphql(
    '{ me { creations(first: 50) { edges { node { id name likedByMe creator { username } agent { key owner { username } } } } } } }',
  ),
};

async function measure(s: { method: string; path: string; body?: string }): Promise<number> {
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next++ < requests) {
      const response = await fetch(url + s.path, {
        method: s.method,
        headers: { 'x-api-key': key, ...(s.body ? { 'content-type': 'application/json' } : {}) },
        body: s.body,
      });
      if (response.status !== 200) throw new Error(`${s.method} ${s.path}: ${response.status} ${await response.text()}`);
      await response.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return requests / ((performance.now() - started) / 1000);
}

const names = Object.keys(scenarios);
const samples = new Map(names.map((n) => [n, [] as number[]]));
for (const name of names) await measure(scenarios[name]!); // warm-up
for (let r = 0; r < rounds; r++) {
  // Interleaved rounds, so load changes on the machine hit every scenario alike.
  for (const name of names) samples.get(name)!.push(await measure(scenarios[name]!));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const baseline = median(samples.get(names[0]!)!);
console.log(`${rounds} rounds × ${requests} requests, concurrency ${concurrency}; median req/s and ratio to the baseline\n`);
for (const name of names) {
  const m = median(samples.get(name)!);
  console.log(`${name.padEnd(52)} ${m.toFixed(0).padStart(7)} req/s   ${(m / baseline).toFixed(2)}×`);
}
await app.close();
process.exit(0);
