import type { EmbeddingProvider } from './embeddings/provider.ts';

/** Query texts are embedded once per process: paging through results asks the provider nothing new. */
const QUERY_CACHE_SIZE = 1000;

/** The vector of a query text, from the provider the first time and from memory after (the oldest forgotten first). */
export function queryVectors(provider: EmbeddingProvider) {
  const known = new Map<string, Float32Array>();
  return async function vectorOf(text: string): Promise<Float32Array> {
    const cached = known.get(text);
    if (cached) return cached;
    const [vector] = await provider.embed([text]);
    if (known.size >= QUERY_CACHE_SIZE) known.delete(known.keys().next().value!);
    known.set(text, vector!);
    return vector!;
  };
}
