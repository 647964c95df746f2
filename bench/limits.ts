// What the limits cost a request that passes them, and how fast hostile documents are refused.
//   npx tsx bench/limits.ts [--rounds 5 --requests 400 --concurrency 8]
// Three instances of the service (each on its own in-memory PGlite) answer GET /v2/creators/me:
// without rate limits, counting in the process, and counting in a throwaway redis-server. Their
// throughput is reported as a ratio to the first, measured in interleaved rounds. Then each
// hostile GraphQL document of test/graphql/hostile.test.ts is timed against a small
// valid query on the same instance.
import { parseArgs } from 'node:util';
import { getIntrospectionQuery } from 'graphql';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { startRedisServer } from '../test/helpers/servers.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    requests: { type: 'string', default: '400' },
    concurrency: { type: 'string', default: '8' },
  },
});
const rounds = Number(values.rounds);
const requests = Number(values.requests);
const concurrency = Number(values.concurrency);

const redis = await startRedisServer();
process.on('exit', () => redis.stop());

// Limits high enough never to refuse, so every request is counted and none is turned away.
const counted = { RATE_LIMIT_FREE: '1000000000' };
async function instance(env: Record<string, string>) {
  const app = await buildApp({ ...loadConfig({ LOG_LEVEL: 'silent', ...env }), port: 0, database: { kind: 'pglite', dataDir: undefined } });
  const url = await app.http.listen({ port: 0, host: '127.0.0.1' });
  const user = await app.services.creators.ensureUser('bench');
  const { apiKey } = await app.services.apiKeys.create(user.id);
  return { app, url, apiKey };
}
const instances = {
  'no rate limits (baseline)': await instance({ RATE_LIMIT_FREE: '0' }),
  'counted in the process': await instance(counted),
  'counted in Redis': await instance({ ...counted, REDIS_URL: redis.url }),
};

async function throughput(target: { url: string; apiKey: string }, path: string, body?: string): Promise<number> {
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next++ < requests) {
      const response = await fetch(target.url + path, {
        method: body ? 'POST' : 'GET',
        headers: { 'x-api-key': target.apiKey, ...(body ? { 'content-type': 'application/json' } : {}) },
        body,
      });
      if (response.status !== 200) throw new Error(`${path}: ${response.status} ${await response.text()}`);
      await response.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return requests / ((performance.now() - started) / 1000);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const names = Object.keys(instances) as (keyof typeof instances)[];
const samples = new Map(names.map((n) => [n, [] as number[]]));
for (const name of names) await throughput(instances[name], '/v2/creators/me'); // warm-up
// Interleaved, and in a different order each round, so neither load nor position favours one.
for (let r = 0; r < rounds; r++) {
  for (const name of [...names.slice(r % names.length), ...names.slice(0, r % names.length)])
    samples.get(name)!.push(await throughput(instances[name], '/v2/creators/me'));
}
const baseline = median(samples.get(names[0]!)!);
console.log(`GET /v2/creators/me, ${requests} requests at concurrency ${concurrency}, median of ${rounds} interleaved rounds`);
for (const name of names) console.log(`  ${name.padEnd(28)} ${(median(samples.get(name)!) / baseline).toFixed(2)}× the baseline`);

// Hostile documents, one at a time, against the valid query's time on the same instance.
const target = instances['counted in the process'];
const introspection = getIntrospectionQuery();
const schemaSelection = introspection.slice(
  introspection.indexOf('{') + 1,
  introspection.lastIndexOf('}', introspection.indexOf('fragment FullType')),
);
const repeat = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i)).join(' ');
const documents: Record<string, string> = {
  'valid: { me { username } } (baseline)': '{ me { username } }',
  'deep nesting': `{ me { ${'agents(first: 1) { edges { node { owner { '.repeat(4)}username${' } } } }'.repeat(4)} } }`,
  '31 aliases': `{ me { ${repeat(31, (i) => `a${i}: username`)} } }`,
  '6,000 tokens': `{ me { ${'username '.repeat(6000)} } }`,
  'one field 4,000 times': `{ me { ${'username '.repeat(4000)} } }`,
  'lists within lists (cost)':
    '{ me { agents(first: 100) { edges { node { owner { agents(first: 100) { edges { node { id } } } } } } } } }',
  '__schema under 30 aliases': `{ ${repeat(30, (i) => `s${i}: ${schemaSelection}`)} } ${introspection.slice(introspection.indexOf('fragment FullType'))}`,
  'fragments doubling 16 times': `{ me { ...F0 } } ${repeat(16, (i) => `fragment F${i} on Creator { username ...F${i + 1} ... on Creator { ...F${i + 1} } }`)} fragment F16 on Creator { id }`,
};
async function latency(query: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 25; i++) {
    const started = performance.now();
    const response = await fetch(`${target.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': target.apiKey },
      body: JSON.stringify({ query }),
    });
    await response.arrayBuffer();
    times.push(performance.now() - started);
  }
  return median(times);
}
const valid = await latency(documents['valid: { me { username } } (baseline)']!);
console.log('\nGraphQL documents over HTTP, median of 25, as a multiple of the valid query');
for (const [name, query] of Object.entries(documents)) console.log(`  ${name.padEnd(40)} ${((await latency(query)) / valid).toFixed(2)}×`);

for (const { app } of Object.values(instances)) await app.close();
redis.stop();
