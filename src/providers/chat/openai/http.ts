import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { type ChatRequest, ProviderError } from '../../../domain/core/chat.ts';
import { brief } from './chunks.ts';

/** A body as text, read until it ends or passes `limit` characters (then what was read, cut there). */
export async function readText(body: AsyncIterable<Buffer>, limit: number) {
  const decoder = new TextDecoder();
  let text = '';
  for await (const piece of body) {
    text += decoder.decode(piece, { stream: true });
    if (text.length > limit) break;
  }
  return text;
}

/** The body asking for a streamed answer, with the usage reported at its end. */
export const streamedRequest = (request: ChatRequest) => ({
  model: request.model,
  messages: request.messages,
  stream: true,
  stream_options: { include_usage: true },
  max_tokens: request.maxTokens,
  ...(request.tools.length ? { tools: request.tools } : {}),
  ...(request.reasoningEffort ? { reasoning_effort: request.reasoningEffort } : {}),
});

/** Posts a request; an answer other than 2xx is a ProviderError saying what came back. */
export type Post = (body: object, signal: AbortSignal) => Promise<IncomingMessage>;

/** The endpoint's `/chat/completions`, over connections kept for the next call. */
export function chatCompletions(baseUrl: string, apiKey: string | undefined): Post {
  const target = new URL(`${baseUrl}/chat/completions`);
  const secure = target.protocol === 'https:';
  // Node's own HTTP client rather than fetch: a reply is read a chunk per token, and fetch's web
  // streams cost about twice the CPU per chunk (measured in bench/README.md). Connections are kept
  // for the next call, as fetch would.
  const agent = secure ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });

  return async function post(body, signal) {
    const payload = JSON.stringify(body);
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = (secure ? httpsRequest : httpRequest)(
        target,
        {
          method: 'POST',
          agent,
          signal,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(payload),
            accept: 'stream' in body && body.stream ? 'text/event-stream' : 'application/json',
            ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
          },
        },
        resolve,
      );
      req.on('error', reject);
      req.end(payload);
    });
    const status = response.statusCode ?? 0;
    if (status < 200 || status > 299) {
      const detail = brief(await readText(response, 4096).catch(() => ''));
      response.destroy();
      const kind = status === 429 ? 'rate_limited' : status >= 500 ? 'server_error' : 'refused';
      throw new ProviderError(`The model provider answered HTTP ${status}${detail ? `: ${detail}` : ''}`, kind !== 'refused', kind);
    }
    return response;
  };
}
