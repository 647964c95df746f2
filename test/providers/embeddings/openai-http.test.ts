import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpEmbeddingProvider } from '../../../src/providers/embeddings/openai-http.ts';
import { axis, startFakeEmbeddings, type FakeEmbeddings } from '../../helpers/fake-embeddings.ts';

const norm = (v: ArrayLike<number>) => Math.hypot(...Array.from(v));

describe('OpenAI-compatible HTTP embeddings', () => {
  let server: FakeEmbeddings;
  beforeAll(async () => {
    server = await startFakeEmbeddings({ lighthouse: axis(0), 'tilted lighthouse': axis(0, 1, 1), fox: axis(2) });
  });
  afterAll(() => server.close());

  const provider = (options: Partial<Parameters<typeof httpEmbeddingProvider>[0]> = {}) =>
    httpEmbeddingProvider({
      url: server.url,
      model: 'clip-vit-l-14',
      batchSize: 2,
      timeoutMs: 10_000,
      retries: 2,
      retryDelayMs: 1,
      ...options,
    });

  it('sends texts in batches of the configured size, in order, with the model and the key', async () => {
    const before = server.requests.length;
    const vectors = await provider({ apiKey: 'sk-test' }).embed(['fox', 'lighthouse', 'tilted lighthouse', 'fox', 'lighthouse']);
    const sent = server.requests.slice(before);
    expect(sent.map((r) => r.input)).toEqual([['fox', 'lighthouse'], ['tilted lighthouse', 'fox'], ['lighthouse']]);
    expect(sent.every((r) => r.model === 'clip-vit-l-14' && r.authorization === 'Bearer sk-test')).toBe(true);
    expect(vectors.map((v) => Array.from(v).findIndex((x) => x > 0.5))).toEqual([2, 0, 0, 2, 0]);
    // Answers are scaled to unit length.
    expect(norm(vectors[2]!)).toBeCloseTo(1, 5);
    expect(vectors[2]![0]).toBeCloseTo(Math.SQRT1_2, 5);
  });

  it('names its vector space after the model', () => {
    expect(provider().name).toBe('openai-http:clip-vit-l-14');
    expect(provider().description).toContain(new URL(server.url).origin);
  });

  it('retries 503 and 429 answers, then succeeds', async () => {
    const before = server.requests.length;
    server.fail(1, 503);
    server.fail(1, 429, { headers: { 'retry-after': '0' } });
    const [v] = await provider().embed(['fox']);
    expect(Array.from(v!)[2]).toBeCloseTo(1, 5);
    expect(server.requests.length - before).toBe(3);
  });

  it('gives up after the configured retries with a message naming the server and the status', async () => {
    const before = server.requests.length;
    server.fail(3, 502);
    await expect(provider({ retries: 2 }).embed(['fox'])).rejects.toThrow(
      /embedding server http:\/\/127\.0\.0\.1:\d+\/v1\/embeddings answered 502.*after 3 attempts/,
    );
    expect(server.requests.length - before).toBe(3);
  });

  it('does not retry a request the server refuses (401)', async () => {
    const before = server.requests.length;
    server.fail(1, 401, { body: '{"error":{"message":"bad key"}}' });
    await expect(provider().embed(['fox'])).rejects.toThrow(/answered 401: .*bad key/);
    expect(server.requests.length - before).toBe(1);
  });

  it('times out an attempt that gets no answer, and retries it', async () => {
    const before = server.requests.length;
    server.holdAfter(0);
    try {
      await expect(provider({ timeoutMs: 50, retries: 1 }).embed(['fox'])).rejects.toThrow(/no answer within 50 ms \(after 2 attempts\)/);
    } finally {
      server.release();
    }
    expect(server.requests.length - before).toBe(2);
  });

  // A process held up itself (a busy machine) finds its attempt's timer due together with what
  // its connection has waiting, and timers run first.
  const holdUpThisProcess = (ms: number) => {
    const until = Date.now() + ms;
    while (Date.now() < until);
  };

  it('does not blame the server for a stall of its own: an answer that came meanwhile is taken', async () => {
    const before = server.requests.length;
    server.afterNextAnswer(() => holdUpThisProcess(150));
    const [v] = await provider({ timeoutMs: 50, retries: 0 }).embed(['fox']);
    expect(Array.from(v!)[2]).toBeCloseTo(1, 5);
    expect(server.requests.length - before).toBe(1);
  });

  it('refuses vectors of another dimension with a message saying what parley stores', async () => {
    server.setDimensions(512);
    try {
      await expect(provider().embed(['fox'])).rejects.toThrow(/returned 512 dimensions; parley stores 768/);
    } finally {
      server.setDimensions(768);
    }
  });

  it('reports an unreachable server', async () => {
    await expect(provider({ url: 'http://127.0.0.1:1/v1', retries: 0 }).embed(['fox'])).rejects.toThrow(/unreachable/);
  });
});
