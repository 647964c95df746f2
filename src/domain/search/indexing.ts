import { creationText } from './creation-text.ts';
import type { EmbeddingProvider } from './embeddings/provider.ts';
import type { EmbeddingSource, SearchStore } from './store.ts';

const REEMBED_BATCH = 256;

/** Keeps creations searchable: each with a vector from the active provider. */
export function searchIndex(
  store: Pick<SearchStore, 'toEmbedAmong' | 'countToEmbed' | 'toEmbedAfter' | 'writeVectors'>,
  provider: EmbeddingProvider,
) {
  async function embedAndStore(creations: readonly EmbeddingSource[]) {
    if (creations.length === 0) return;
    const embeddings = await provider.embed(creations.map(creationText));
    await store.writeVectors(
      provider.name,
      creations.map((c, i) => ({ id: c.id, vector: embeddings[i]! })),
    );
  }

  return {
    /**
     * Makes creations searchable: those of them without an embedding of the active provider are
     * embedded (name and prompt) and their vectors stored. Call it once the creations are committed.
     */
    async indexCreations(ids: readonly string[]) {
      const creations = await store.toEmbedAmong({ notFrom: provider.name }, ids);
      await embedAndStore(creations);
      return { embedded: creations.length };
    },

    /**
     * Re-embeds, in batches, every creation whose embedding is missing or from another provider
     * (or every creation, with `all`). Each batch is one write, so an interrupted run resumes
     * where it stopped.
     */
    async reembed(options: { all?: boolean; onProgress?: (done: number, total: number) => void } = {}) {
      const scope = options.all ? 'all' : { notFrom: provider.name };
      const total = await store.countToEmbed(scope);
      let done = 0;
      options.onProgress?.(done, total);
      for (let lastId: string | undefined; done < total; ) {
        const batch = await store.toEmbedAfter(scope, lastId, REEMBED_BATCH);
        if (batch.length === 0) break;
        await embedAndStore(batch);
        done += batch.length;
        lastId = batch.at(-1)!.id;
        options.onProgress?.(done, total);
      }
      return { reembedded: done, provider: provider.name };
    },
  };
}
