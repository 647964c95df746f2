import type { LlmConfig } from '../../config.ts';
import { offlineProvider } from './providers/offline.ts';
import { openAiProvider } from './providers/openai.ts';
import type { ChatProvider, ProviderErrorKind } from '../core/chat.ts';

/**
 * The configured model provider: an OpenAI-compatible endpoint, or the offline responder.
 * `onError` hears of every failed call, whoever made it (replies, titles, memories).
 */
export function chooseProvider(llm: LlmConfig, onError: (kind: ProviderErrorKind) => void): { provider: ChatProvider; offline: boolean } {
  if (!llm.baseUrl) return { provider: offlineProvider(llm.offlineTokenDelayMs), offline: true };
  return {
    provider: openAiProvider({ ...llm, baseUrl: llm.baseUrl }, onError),
    offline: false,
  };
}
