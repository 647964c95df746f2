import type { LlmConfig } from '../../config.ts';
import { type ChatProvider, type ChatRequest, ProviderError } from '../../domain/core/chat.ts';
import { brief, completionSchema, MAX_CHUNK_CHARS, parseJson, reportedError, seconds } from './openai/chunks.ts';
import { chatCompletions, type Post, readText } from './openai/http.ts';
import { streamOnce } from './openai/stream.ts';

export { MAX_CHUNK_CHARS } from './openai/chunks.ts';

/**
 * A whole answer in one response (`stream: false`), for the service's own short calls (titles,
 * memories): one body to read instead of a chunk per token. Bounded by `maxCallMs`; the body
 * may hold at most MAX_CHUNK_CHARS.
 */
async function complete(post: Post, maxCallMs: number, request: ChatRequest, signal: AbortSignal): Promise<string> {
  const overtime = AbortSignal.timeout(maxCallMs);
  try {
    const body = await post(
      { model: request.model, messages: request.messages, stream: false, max_tokens: request.maxTokens },
      AbortSignal.any([signal, overtime]),
    );
    const raw = await readText(body, MAX_CHUNK_CHARS);
    if (raw.length > MAX_CHUNK_CHARS)
      throw new ProviderError(`The model provider sent an answer longer than ${MAX_CHUNK_CHARS} characters`, false, 'malformed');
    const parsed = completionSchema.safeParse(parseJson(raw, 'answer'));
    if (!parsed.success) throw new ProviderError('The model provider sent an answer of an unexpected shape', false, 'malformed');
    if (parsed.data.error) throw reportedError(parsed.data.error);
    return parsed.data.choices?.[0]?.message?.content ?? '';
  } catch (e) {
    if (e instanceof ProviderError || signal.aborted) throw e;
    if (overtime.aborted) throw new ProviderError(`The model provider did not answer within ${seconds(maxCallMs)}`, true, 'timeout');
    throw new ProviderError(`Could not reach the model provider (${brief((e as Error).message)})`, true, 'unreachable');
  }
}

/**
 * Any OpenAI-compatible chat-completions endpoint: replies streamed (`openai/stream.ts`), the
 * service's own short calls answered whole. Each call is one try; a failure before the first
 * chunk is marked transient, and `withOneRetry` (`domain/replies/provider.ts`) tries such a call once more.
 * The parts: `openai/http.ts` (the connection), `openai/chunks.ts` (what a chunk may hold).
 */
export function openAiProvider(config: LlmConfig & { baseUrl: string }): ChatProvider {
  const post = chatCompletions(config.baseUrl, config.apiKey);
  return {
    description: `OpenAI-compatible endpoint at ${new URL(config.baseUrl).origin}`,
    complete: (request, signal) => complete(post, config.maxCallMs, request, signal),
    stream: (request, signal, onDelta) => streamOnce(post, config, request, signal, onDelta),
  };
}
