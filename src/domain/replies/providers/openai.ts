import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { finished as finishedReading } from 'node:stream';
import { z } from 'zod';
import type { LlmConfig } from '../../../config.ts';
import { SseEventReader, SseEventTooLarge } from './sse-lines.ts';
import { ProviderError, type ChatDelta, type ChatProvider, type ChatRequest, type ProviderErrorKind } from '../../core/chat.ts';

const text = z.string().nullish();
/**
 * A count of tokens one call used. Far above any model's context window; a larger count is
 * nonsense that would go into the session's counter (a 32-bit integer) and break its saves.
 */
const tokenCount = z.number().int().min(0).max(10_000_000).nullish();
/**
 * What a streamed chunk may hold. Fields we do not read are ignored; a field we read with
 * another type (a number for text, choices that are not a list) ends the reply rather than
 * writing nonsense into it.
 */
const chunkSchema = z.object({
  choices: z
    .array(
      z.object({
        delta: z
          .object({
            content: text,
            reasoning_content: text,
            reasoning: text,
            // A model asks for a handful of tools at most; a huge index would make a huge array.
            tool_calls: z
              .array(
                z.object({
                  index: z.number().int().min(0).max(127),
                  id: text,
                  function: z.object({ name: text, arguments: text }).nullish(),
                }),
              )
              .nullish(),
          })
          .nullish(),
        finish_reason: text,
      }),
    )
    .nullish(),
  usage: z.object({ prompt_tokens: tokenCount, completion_tokens: tokenCount }).nullish(),
  error: z.union([z.string(), z.object({ message: text })]).nullish(),
});

/** What a whole (not streamed) completion may hold, read as leniently as a chunk. */
const completionSchema = z.object({
  choices: z.array(z.object({ message: z.object({ content: text }).nullish() })).nullish(),
  error: chunkSchema.shape.error,
});

/** One chunk (one SSE event) may be this long: far above any real one, low enough to bound memory. */
export const MAX_CHUNK_CHARS = 1024 * 1024;

/** How long the end of a body may take to come after its [DONE] before the connection is given up. */
const DRAIN_AFTER_DONE_MS = 1_000;

/** A body as text, read until it ends or passes `limit` characters (then what was read, cut there). */
async function readText(body: AsyncIterable<Buffer>, limit: number) {
  const decoder = new TextDecoder();
  let text = '';
  for await (const piece of body) {
    text += decoder.decode(piece, { stream: true });
    if (text.length > limit) break;
  }
  return text;
}

function parseJson(text: string, what: 'chunk' | 'answer'): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new ProviderError(`The model provider sent a malformed ${what}`, false, 'malformed');
  }
}

/**
 * Model text without NUL characters: PostgreSQL text cannot hold them, and a reply is saved as
 * streamed, so a model that writes one would otherwise show a text that cannot be kept.
 */
const storable = (text: string | null | undefined) => (text?.includes('\u0000') ? text.replaceAll('\u0000', '') : text);

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;
const brief = (text: string) => text.replace(/\s+/g, ' ').trim().slice(0, 200);

/**
 * Any OpenAI-compatible chat-completions endpoint, streaming. A call that fails before its first
 * chunk (network, timeout, 5xx, 429) is retried once; after that a failure ends the reply, since
 * the user has already seen part of it.
 */
export function openAiProvider(
  config: LlmConfig & { baseUrl: string },
  /** Hears of every call that failed for good, whoever made it (replies, titles, memories). */
  onError: (kind: ProviderErrorKind) => void = () => {},
): ChatProvider {
  const url = `${config.baseUrl}/chat/completions`;

  const target = new URL(url);
  const secure = target.protocol === 'https:';
  // Node's own HTTP client rather than fetch: a reply is read a chunk per token, and fetch's web
  // streams cost about twice the CPU per chunk (measured in bench/README.md). Connections are kept
  // for the next call, as fetch would.
  const agent = secure ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });

  /** Posts a request; an answer other than 2xx is a ProviderError saying what came back. */
  async function post(body: object, signal: AbortSignal): Promise<IncomingMessage> {
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
            ...(config.apiKey ? { authorization: `Bearer ${config.apiKey}` } : {}),
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
  }

  const reportedError = (error: NonNullable<z.infer<typeof chunkSchema>['error']>) =>
    new ProviderError(
      `The model provider reported an error: ${brief((typeof error === 'string' ? error : error.message) ?? 'unknown')}`,
      false,
      'reported',
    );

  /** One try at a streamed answer: each piece goes to `onDelta` as its chunk is read. */
  async function attempt(
    request: ChatRequest,
    outer: AbortSignal,
    onFirstChunk: () => void,
    onDelta: (delta: ChatDelta) => void,
  ): Promise<void> {
    const controller = new AbortController();
    const abort = () => controller.abort();
    outer.addEventListener('abort', abort, { once: true });
    let timeout: ProviderError | null = null;
    let timer: NodeJS.Timeout | undefined;
    const arm = (ms: number, message: string) => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        timeout = new ProviderError(message, true, 'timeout');
        controller.abort();
      }, ms);
    };
    // What `onDelta` throws (the caller cutting the reply off) is the caller's, passed on as it is.
    let callerThrew = false;
    const hand = (delta: ChatDelta) => {
      try {
        onDelta(delta);
      } catch (e) {
        callerThrew = true;
        throw e;
      }
    };
    arm(config.firstTokenTimeoutMs, `The model provider did not answer within ${seconds(config.firstTokenTimeoutMs)}`);
    try {
      const body = await post(
        {
          model: request.model,
          messages: request.messages,
          stream: true,
          stream_options: { include_usage: true },
          max_tokens: request.maxTokens,
          ...(request.tools.length ? { tools: request.tools } : {}),
          ...(request.reasoningEffort ? { reasoning_effort: request.reasoningEffort } : {}),
        },
        controller.signal,
      );
      let first = true;
      let finished = false;
      let done = false;
      const read = (data: string) => {
        if (done) return;
        // The idle timer is set at the first chunk, and each later one restarts it: a new timer
        // and message for every token would be work for nothing.
        if (first) {
          first = false;
          onFirstChunk();
          arm(config.idleTimeoutMs, `The model provider stopped sending for ${seconds(config.idleTimeoutMs)} in the middle of a reply`);
        } else timer?.refresh();
        if (data.trim() === '[DONE]') {
          done = true;
          return;
        }
        const parsed = chunkSchema.safeParse(parseJson(data, 'chunk'));
        if (!parsed.success) {
          const issue = parsed.error.issues[0]!;
          throw new ProviderError(
            `The model provider sent a chunk of an unexpected shape (${issue.path.join('.') || 'chunk'}: ${issue.message})`,
            false,
            'malformed',
          );
        }
        const chunk = parsed.data;
        if (chunk.error) throw reportedError(chunk.error);
        for (const choice of chunk.choices ?? []) {
          const delta = choice.delta ?? {};
          const reasoning = storable(delta.reasoning_content ?? delta.reasoning);
          if (reasoning) hand({ type: 'reasoning', text: reasoning });
          const content = storable(delta.content);
          if (content) hand({ type: 'content', text: content });
          for (const call of delta.tool_calls ?? []) {
            hand({
              type: 'tool_call',
              index: call.index,
              id: storable(call.id) ?? undefined,
              name: storable(call.function?.name) ?? undefined,
              arguments: storable(call.function?.arguments) ?? undefined,
            });
          }
          if (choice.finish_reason) finished = true;
        }
        if (chunk.usage)
          hand({ type: 'usage', promptTokens: chunk.usage.prompt_tokens ?? 0, completionTokens: chunk.usage.completion_tokens ?? 0 });
      };
      await new Promise<void>((resolve, reject) => {
        const events = new SseEventReader(MAX_CHUNK_CHARS, read);
        let settled = false;
        const fail = (e: unknown) => {
          if (settled) return;
          settled = true;
          body.destroy();
          reject(e);
        };
        const succeed = () => {
          if (settled) return;
          settled = true;
          resolve();
          // What follows [DONE] is only the end of the body; once read, the connection serves the
          // next call. A provider that never ends it loses the connection instead.
          if (body.readableEnded) return;
          const giveUp = setTimeout(() => body.destroy(), DRAIN_AFTER_DONE_MS).unref();
          body.once('end', () => clearTimeout(giveUp));
        };
        body.on('data', (chunk: Buffer) => {
          if (settled) return;
          try {
            events.push(chunk);
          } catch (e) {
            return fail(e);
          }
          if (done) succeed();
        });
        finishedReading(body, (error) => {
          if (settled) return;
          if (error) return fail(error);
          try {
            events.end();
          } catch (e) {
            return fail(e);
          }
          if (done || finished) succeed();
          else fail(new ProviderError('The connection to the model provider closed in the middle of a reply', true, 'interrupted'));
        });
      });
    } catch (e) {
      if (callerThrew) throw e;
      if (timeout) throw timeout;
      if (outer.aborted || e instanceof ProviderError) throw e;
      if (e instanceof SseEventTooLarge)
        throw new ProviderError(`The model provider sent a chunk longer than ${e.limit} characters`, false, 'malformed');
      throw new ProviderError(`Could not reach the model provider (${brief((e as Error).message)})`, true, 'unreachable');
    } finally {
      clearTimeout(timer);
      outer.removeEventListener('abort', abort);
    }
  }

  /**
   * A whole answer in one response (`stream: false`), for the service's own short calls (titles,
   * memories): one body to read instead of a chunk per token. Bounded by `maxCallMs`; the body
   * may hold at most MAX_CHUNK_CHARS.
   */
  async function complete(request: ChatRequest, signal: AbortSignal): Promise<string> {
    const overtime = AbortSignal.timeout(config.maxCallMs);
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
      if (overtime.aborted)
        throw new ProviderError(`The model provider did not answer within ${seconds(config.maxCallMs)}`, true, 'timeout');
      throw new ProviderError(`Could not reach the model provider (${brief((e as Error).message)})`, true, 'unreachable');
    }
  }

  /** Tells `onError` of a failed call before it is thrown on. */
  const heard = (e: unknown): never => {
    if (e instanceof ProviderError) onError(e.kind);
    throw e;
  };

  return {
    description: `OpenAI-compatible endpoint at ${new URL(config.baseUrl).origin}`,
    complete: (request, signal) => complete(request, signal).catch(heard),
    async stream(request, signal, onDelta) {
      for (let tries = 0; ; tries++) {
        let started = false;
        try {
          return await attempt(request, signal, () => (started = true), onDelta);
        } catch (e) {
          if (signal.aborted || started || tries > 0 || !(e instanceof ProviderError) || !e.transient) heard(e);
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
    },
  };
}
