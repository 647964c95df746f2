import type { LlmConfig } from '../../config.ts';
import { offlineProvider } from './providers/offline.ts';
import { openAiProvider } from './providers/openai.ts';
import { ProviderError, type ChatProvider, type ProviderErrorKind } from './providers/types.ts';

/**
 * The configured model provider: an OpenAI-compatible endpoint, or the offline responder.
 * `onError` hears of every failed call, whoever made it (replies, titles, memories).
 */
export function chooseProvider(llm: LlmConfig, onError: (kind: ProviderErrorKind) => void): { provider: ChatProvider; offline: boolean } {
  if (!llm.baseUrl) return { provider: offlineProvider(llm.offlineTokenDelayMs), offline: true };
  const provider = openAiProvider({ ...llm, baseUrl: llm.baseUrl });
  const heard = (e: unknown) => {
    if (e instanceof ProviderError) onError(e.kind);
    throw e;
  };
  return {
    provider: {
      description: provider.description,
      async *stream(request, signal) {
        try {
          yield* provider.stream(request, signal);
        } catch (e) {
          heard(e);
        }
      },
      complete: (request, signal) => provider.complete(request, signal).catch(heard),
    },
    offline: false,
  };
}
