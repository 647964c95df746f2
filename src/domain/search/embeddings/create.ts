import type { EmbeddingsConfig } from '../../../config.ts';
import { hashedNgramsProvider } from './hashed-ngrams.ts';
import { httpEmbeddingProvider } from './openai-http.ts';
import type { EmbeddingProvider } from './provider.ts';

export const createEmbeddingProvider = (config: EmbeddingsConfig): EmbeddingProvider =>
  config.kind === 'http' ? httpEmbeddingProvider(config) : hashedNgramsProvider;
