import type { LlmConfig } from '../../config.ts';
import { offlineProvider } from './providers/offline.ts';
import { openAiProvider } from './providers/openai.ts';
import type { ChatProvider } from './providers/types.ts';

/** The configured model provider: an OpenAI-compatible endpoint, or the offline responder. */
export function chooseProvider(llm: LlmConfig): { provider: ChatProvider; offline: boolean } {
  return llm.baseUrl
    ? { provider: openAiProvider({ ...llm, baseUrl: llm.baseUrl }), offline: false }
    : { provider: offlineProvider(llm.offlineTokenDelayMs), offline: true };
}
