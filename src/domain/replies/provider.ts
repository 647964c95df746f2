import { type ChatProvider, ProviderError, type ProviderErrorKind } from '../core/chat.ts';

/** Pause before a model call is tried again. */
const RETRY_AFTER_MS = 250;

/**
 * A provider whose streamed calls that fail before it started answering (a transient
 * ProviderError: network, timeout, 5xx, 429) are tried once more; after that a failure ends the
 * reply, since the user has already seen part of it. `onError` hears of every call that failed
 * for good, whoever made it (replies, titles, memories).
 */
export function withOneRetry(provider: ChatProvider, onError: (kind: ProviderErrorKind) => void): ChatProvider {
  /** Tells `onError` of a failed call before it is thrown on. */
  const heard = (e: unknown): never => {
    if (e instanceof ProviderError) onError(e.kind);
    throw e;
  };
  return {
    description: provider.description,
    complete: (request, signal) => provider.complete(request, signal).catch(heard),
    async stream(request, signal, onDelta) {
      for (let tries = 0; ; tries++) {
        try {
          return await provider.stream(request, signal, onDelta);
        } catch (e) {
          if (signal.aborted || tries > 0 || !(e instanceof ProviderError) || !e.transient) heard(e);
          await new Promise((resolve) => setTimeout(resolve, RETRY_AFTER_MS));
        }
      }
    },
  };
}

/**
 * The model provider a composition root picked (`src/providers/`): an OpenAI-compatible
 * endpoint, or the offline responder (`providers/offline.ts`), with which titles and memories
 * come from rules rather than from a model call.
 */
export interface ChosenProvider {
  provider: ChatProvider;
  offline: boolean;
}
