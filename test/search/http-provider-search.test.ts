import { describe, expect, it } from 'vitest';
import { defaultSearchConfig } from '../../src/config.ts';
import { hashedNgramsProvider } from '../../src/domain/search/embeddings/hashed-ngrams.ts';
import { searchService } from '../../src/domain/search/service.ts';
import { searchStore } from '../../src/domain/search/store.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { axis, startFakeEmbeddings, type FakeEmbeddings } from '../helpers/fake-embeddings.ts';
import { expectNoInternals } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';
import { searchableCreation, searchPath } from './support.ts';

/**
 * Search through an embedding server: a fake one on loopback speaking OpenAI's wire format and
 * answering known vectors, so ranking follows meaning the test decides, not shared words.
 */
let t: TestApp;
let server: FakeEmbeddings;
let alice: TestUser;

setUp(async (start) => {
  server = await start.service(
    startFakeEmbeddings({
      // Creations (their names are their whole text).
      'Lighthouse at the cliff': axis(0),
      'Fox in the snow': axis(1),
      'Koi pond': axis(2),
      'Night harbour': axis(0, 3, 1),
      // Queries sharing no word with what they should find.
      'a tall tower that guides ships': axis(0, 5, 0.2),
      'winter animal': axis(1, 6, 0.5),
    }),
  );
  t = await start.app({
    search: {
      ...defaultSearchConfig,
      embeddings: { kind: 'http', url: server.url, model: 'fake-clip', batchSize: 16, timeoutMs: 10_000, retries: 0 },
    },
  });
  alice = await t.createUser('alice');
  for (const name of ['Lighthouse at the cliff', 'Fox in the snow', 'Koi pond', 'Night harbour'])
    await searchableCreation(t, alice, { name });
});

const search = async (query: string, extra: Record<string, string | number> = {}) =>
  (await t.rest('GET', searchPath({ query, ...extra }), { key: alice.apiKey })).body;

describe('search with an OpenAI-compatible embedding server', () => {
  it('ranks by the cosine of the known vectors: the expected creation first, unrelated ones cut', async () => {
    const page = await search('a tall tower that guides ships');
    expect(page.docs.map((d: { name: string }) => d.name)).toEqual(['Lighthouse at the cliff', 'Night harbour']);
    expect(page.total).toBe(2);
    expect(page.docs[0].score).toBeCloseTo(1 / Math.sqrt(1.04), 5);
    expect(page.docs[1].score).toBeCloseTo(Math.SQRT1_2 / Math.sqrt(1.04), 5);
    expect((await search('winter animal')).docs.map((d: { name: string }) => d.name)).toEqual(['Fox in the snow']);
    expect((await search('something the server has never heard of')).total).toBe(0);
  });

  it('stores the provider and the dimension with each embedding', async () => {
    const rows = await t.db.creation.findMany({
      where: { userId: alice.id },
      select: { embeddingProvider: true, embeddingDimensions: true },
    });
    expect(rows).toHaveLength(4);
    expect(new Set(rows.map((r) => `${r.embeddingProvider}/${r.embeddingDimensions}`))).toEqual(new Set(['openai-http:fake-clip/768']));
  });

  it('embeds a query text once: paging asks the server nothing new', async () => {
    const before = server.requests.length;
    await search('winter animal', { page: 1, limit: 1 });
    await search('winter animal', { page: 2, limit: 1 });
    expect(server.requests.length - before).toBe(0);
    await search('a brand new question');
    expect(server.requests.slice(before).map((r) => r.input)).toEqual([['a brand new question']]);
  });

  it('never compares vectors of two providers: a creation embedded by another provider is found only after reembed', async () => {
    const offline = searchService(searchStore(t.db), defaultSearchConfig, hashedNgramsProvider);
    const stray = await t.db.creation.create({
      data: { userId: alice.id, tool: 'flux_dev', name: 'Lighthouse at the cliff', url: 'https://cdn.example.com/stray.png', public: true },
    });
    await offline.indexCreations([stray.id]);
    expect((await t.db.creation.findUniqueOrThrow({ where: { id: stray.id } })).embeddingProvider).toBe('hashed-ngrams-v1');
    expect((await search('a tall tower that guides ships')).docs.map((d: { id: string }) => d.id)).not.toContain(stray.id);

    const progress: [number, number][] = [];
    expect(await t.services.search.reembed({ onProgress: (done, total) => progress.push([done, total]) })).toEqual({
      reembedded: 1,
      provider: 'openai-http:fake-clip',
    });
    expect(progress).toEqual([
      [0, 1],
      [1, 1],
    ]);
    expect((await search('a tall tower that guides ships')).docs.map((d: { id: string }) => d.id)).toContain(stray.id);
    // Nothing left to do.
    expect(await t.services.search.reembed()).toEqual({ reembedded: 0, provider: 'openai-http:fake-clip' });
  });

  it('answers 500 without details when the embedding server fails, and works again when it is back', async () => {
    server.fail(1, 500);
    const res = await t.rest('GET', searchPath({ query: 'a question while the server is down' }), { key: alice.apiKey });
    expect(res.status).toBe(500);
    expectNoInternals(JSON.stringify(res.body));
    expect(JSON.stringify(res.body)).not.toContain('127.0.0.1');
    expect((await t.rest('GET', searchPath({ query: 'a question while the server is down' }), { key: alice.apiKey })).status).toBe(200);
  });

  it('names the provider and the storage in /healthz', async () => {
    const health = (await t.rest('GET', '/healthz')).body;
    expect(health.search.embeddings).toMatch(
      /^openai-http:fake-clip: OpenAI-compatible embedding server at http:\/\/127\.0\.0\.1:\d+, model fake-clip$/,
    );
    expect(health.search.storage).toMatch(/^(pgvector vector\(768\), HNSW|exact scan over real\[\])/);
  });
});
