import type { EmbeddingsConfig, LlmConfig } from '../config.ts';
import type { ChosenProvider } from '../domain/replies/provider.ts';
import { offlineProvider } from '../domain/replies/providers/offline.ts';
import { hashedNgramsProvider } from '../domain/search/embeddings/hashed-ngrams.ts';
import type { EmbeddingProvider } from '../domain/search/embeddings/provider.ts';
import { openAiProvider } from './chat/openai.ts';
import { httpEmbeddingProvider } from './embeddings/openai-http.ts';

/** The model provider the settings ask for: an OpenAI-compatible endpoint at LLM_BASE_URL, or the offline responder. */
export function chatProviderFor(llm: LlmConfig): ChosenProvider {
  if (!llm.baseUrl) return { provider: offlineProvider(llm.offlineTokenDelayMs), offline: true };
  return { provider: openAiProvider({ ...llm, baseUrl: llm.baseUrl }), offline: false };
}

/** The embeddings the settings ask for: an OpenAI-compatible server at EMBEDDINGS_URL, or the built-in hashed n-grams. */
export const embeddingProviderFor = (config: EmbeddingsConfig): EmbeddingProvider =>
  config.kind === 'http' ? httpEmbeddingProvider(config) : hashedNgramsProvider;
