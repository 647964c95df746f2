// Vector search at scale on the embedded database: N synthetic unit vectors in clusters are
// imported through the importer (the code `parley creations import` runs), the HNSW index is
// built, then queries are timed and their top 20 compared with exact search done here in JS.
//   npm run bench:search [-- --sizes 10000,100000 --queries 200 --clusters 200]
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { buildApp } from '../src/app.ts';
import { defaultSearchConfig, loadConfig } from '../src/config.ts';
import { EMBEDDING_DIMENSIONS as D } from '../src/domain/search/embeddings/provider.ts';
import { vectorStore } from '../src/domain/search/vector-store.ts';

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '10000,100000' },
    queries: { type: 'string', default: '200' },
    clusters: { type: 'string', default: '200' },
    'ef-search': { type: 'string', default: String(defaultSearchConfig.efSearch) },
  },
});
const sizes = values.sizes.split(',').map(Number);
const queryCount = Number(values.queries);
const clusterCount = Number(values.clusters);
const efSearch = Number(values['ef-search']);
const K = 20;

/** A seeded generator, so every run measures the same data. */
function random(seed: number) {
  let s = seed >>> 0;
  const uniform = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return () => Math.sqrt(-2 * Math.log(uniform() || 1e-12)) * Math.cos(2 * Math.PI * uniform());
}

const normalize = (v: Float32Array, at = 0) => {
  let n = 0;
  for (let i = 0; i < D; i++) n += v[at + i]! ** 2;
  n = Math.sqrt(n);
  for (let i = 0; i < D; i++) v[at + i]! /= n;
};

/** Cluster centres, then members at about the centre's own length of noise from it. */
function dataset(n: number, seed: number) {
  const gauss = random(seed);
  const centres = new Float32Array(clusterCount * D);
  for (let i = 0; i < centres.length; i++) centres[i] = gauss();
  for (let c = 0; c < clusterCount; c++) normalize(centres, c * D);
  const member = (out: Float32Array, at: number) => {
    const c = Math.floor(Math.abs(gauss() * 1e6)) % clusterCount;
    for (let i = 0; i < D; i++) out[at + i] = centres[c * D + i]! + gauss() / Math.sqrt(D);
    normalize(out, at);
  };
  const vectors = new Float32Array(n * D);
  for (let r = 0; r < n; r++) member(vectors, r * D);
  const queries = new Float32Array(queryCount * D);
  for (let q = 0; q < queryCount; q++) member(queries, q * D);
  return { vectors, queries };
}

function exactTopK(vectors: Float32Array, n: number, q: Float32Array, qAt: number): number[] {
  const scores = new Float32Array(n);
  for (let r = 0; r < n; r++) {
    let dot = 0;
    for (let i = 0, at = r * D; i < D; i++) dot += vectors[at + i]! * q[qAt + i]!;
    scores[r] = dot;
  }
  return Array.from(scores.keys())
    .sort((a, b) => scores[b]! - scores[a]!)
    .slice(0, K);
}

const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const mb = (bytes: bigint | number) => `${(Number(bytes) / 2 ** 20).toFixed(0)} MB`;

console.log(`PGlite on disk, ${D} dimensions, ${clusterCount} clusters, ${queryCount} queries, top ${K}, hnsw.ef_search ${efSearch}\n`);
for (const n of sizes) {
  const dir = await mkdtemp(join(tmpdir(), 'parley-bench-search-'));
  const app = await buildApp({
    ...loadConfig({ LOG_LEVEL: 'silent' }),
    port: 0,
    database: { kind: 'pglite', dataDir: dir },
    search: { ...defaultSearchConfig, efSearch },
  });
  const db = app.services.db;
  const user = await app.services.creators.ensureUser('bench');
  const { vectors, queries } = dataset(n, n);
  const ids: string[] = Array.from({ length: n }, (_, r) => `bench-${r}`);

  // Bulk load as one would: without the index, which is built once at the end.
  await db.$executeRawUnsafe('DROP INDEX "Creation_embedding_hnsw_idx"');
  async function* lines() {
    for (let r = 0; r < n; r++) {
      yield JSON.stringify({
        id: ids[r],
        user: user.username,
        tool: 'flux_dev',
        name: `synthetic ${r}`,
        url: `https://cdn.example.com/${r}.png`,
        public: true,
        embedding: Array.from(vectors.subarray(r * D, (r + 1) * D)),
      });
    }
  }
  let started = performance.now();
  const summary = await app.services.search.importCreations(lines());
  const importSeconds = (performance.now() - started) / 1000;
  if (summary.imported !== n) throw new Error(`imported ${summary.imported} of ${n}: ${JSON.stringify(summary.rejections.slice(0, 3))}`);

  started = performance.now();
  await db.$executeRawUnsafe(`SET maintenance_work_mem = '1GB'`);
  await db.$executeRawUnsafe('CREATE INDEX "Creation_embedding_hnsw_idx" ON "Creation" USING hnsw ("embedding" vector_cosine_ops)');
  const buildSeconds = (performance.now() - started) / 1000;
  await db.$executeRawUnsafe('VACUUM ANALYZE "Creation"');

  const store = vectorStore(db, 'vector');
  const viewerId = user.id;
  const run = (q: number, window: number) =>
    store.nearest({
      vector: queries.subarray(q * D, (q + 1) * D),
      provider: app.services.search.provider.name,
      viewerId,
      filters: {},
      minScore: -1,
      window,
      efSearch,
      orderBy: 'score',
      direction: 'desc',
      slice: { offset: 0, limit: K },
    });
  for (let q = 0; q < Math.min(20, queryCount); q++) await run(q, K); // warm-up
  const scenarios = [
    { label: `top ${K} (LIMIT ${K})`, window: K },
    { label: `search page (window ${defaultSearchConfig.maxResults}, first ${K})`, window: defaultSearchConfig.maxResults },
  ];
  const results = [];
  for (const s of scenarios) {
    const latencies: number[] = [];
    let found = 0;
    for (let q = 0; q < queryCount; q++) {
      const t0 = performance.now();
      const { hits } = await run(q, s.window);
      latencies.push(performance.now() - t0);
      const exact = new Set(exactTopK(vectors, n, queries, q * D).map((r) => ids[r]));
      found += hits.filter((h) => exact.has(h.id)).length;
    }
    results.push({ ...s, p50: percentile(latencies, 50), p99: percentile(latencies, 99), recall: found / (queryCount * K) });
  }
  const [size] = await db.$queryRawUnsafe<{ database: bigint; index: bigint; table: bigint }[]>(
    `SELECT pg_database_size(current_database()) AS database, pg_relation_size('"Creation_embedding_hnsw_idx"') AS index, pg_total_relation_size('"Creation"') AS "table"`,
  );
  console.log(`N = ${n.toLocaleString('en')}`);
  console.log(`  import     ${(n / importSeconds).toFixed(0)} creations/s (${importSeconds.toFixed(1)} s, with vectors, no index)`);
  console.log(`  HNSW build ${buildSeconds.toFixed(1)} s`);
  for (const r of results)
    console.log(`  ${r.label.padEnd(36)} p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, recall@${K} ${r.recall.toFixed(3)}`);
  console.log(`  size       database ${mb(size!.database)}, Creation with indexes ${mb(size!.table)}, HNSW index ${mb(size!.index)}\n`);
  await app.close();
  await rm(dir, { recursive: true, force: true });
}
process.exit(0);
