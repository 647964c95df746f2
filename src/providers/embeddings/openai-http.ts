import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { EMBEDDING_DIMENSIONS, EmbeddingError, unitVector, type EmbeddingProvider } from '../../domain/search/embeddings/provider.ts';

export interface HttpEmbeddingOptions {
  /** Base URL of an OpenAI-compatible API, e.g. `http://127.0.0.1:7997/v1`; requests go to `<url>/embeddings`. */
  url: string;
  model: string;
  apiKey?: string;
  /** Texts per request. */
  batchSize: number;
  /** Per attempt. */
  timeoutMs: number;
  /** Further attempts after a failed one (network error, timeout, 408, 429, 5xx). */
  retries: number;
  /** First back-off; it doubles per attempt, with jitter. */
  retryDelayMs?: number;
}

const responseSchema = z.object({
  data: z.array(z.object({ index: z.number().int().nonnegative(), embedding: z.array(z.number()) })),
});

const retryableStatus = (status: number) => status === 408 || status === 429 || status >= 500;
const MAX_DELAY_MS = 30_000;

class RetryableError extends EmbeddingError {
  constructor(
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** Seconds or an HTTP date, as servers send it with 429 and 503. */
function retryAfter(header: string | null): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(header) - Date.now();
  return Number.isFinite(ms) && ms >= 0 ? Math.min(ms, MAX_DELAY_MS) : undefined;
}

/**
 * An attempt's time limit, judged once the event loop has read what is waiting (as the replies'
 * provider judges its own): a process held up itself, on a busy machine, finds its timer due
 * together with the server's answer, and timers run first.
 */
function attemptLimit(ms: number) {
  const controller = new AbortController();
  let ended = false;
  const timer = setTimeout(
    () => setImmediate(() => ended || controller.abort(new DOMException(`no answer within ${ms} ms`, 'TimeoutError'))),
    ms,
  );
  return {
    signal: controller.signal,
    end() {
      ended = true;
      clearTimeout(timer);
    },
  };
}

/**
 * An embedding server speaking OpenAI's `POST /v1/embeddings` (a hosted API, or a self-run
 * CLIP server such as one serving ViT-L/14 text embeddings). Texts go in batches, each attempt
 * has a timeout, and transient failures are retried with exponential back-off.
 */
export function httpEmbeddingProvider(options: HttpEmbeddingOptions): EmbeddingProvider {
  const endpoint = `${options.url.replace(/\/+$/, '')}/embeddings`;
  const where = `embedding server ${endpoint}`;
  const baseDelay = options.retryDelayMs ?? 500;

  async function attempt(input: readonly string[]): Promise<Float32Array[]> {
    const limit = attemptLimit(options.timeoutMs);
    try {
      return answerOf(input, await answered(input, limit.signal));
    } finally {
      limit.end();
    }
  }

  /** The status and body of one request, or a RetryableError when there is none in time. */
  async function answered(input: readonly string[], signal: AbortSignal) {
    let response: Response;
    try {
      response = await fetch(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}) },
        body: JSON.stringify({ model: options.model, input, encoding_format: 'float' }),
        signal,
      });
    } catch (e) {
      const timedOut = (e as Error).name === 'TimeoutError';
      throw new RetryableError(
        `${where}: ${timedOut ? `no answer within ${options.timeoutMs} ms` : `unreachable (${(e as Error).message})`}`,
      );
    }
    return { response, text: await response.text().catch(() => '') };
  }

  function answerOf(input: readonly string[], { response, text }: { response: Response; text: string }): Float32Array[] {
    if (!response.ok) {
      const message = `${where} answered ${response.status}: ${text.slice(0, 200)}`;
      if (retryableStatus(response.status)) throw new RetryableError(message, retryAfter(response.headers.get('retry-after')));
      throw new EmbeddingError(message);
    }
    let parsed;
    try {
      parsed = responseSchema.parse(JSON.parse(text));
    } catch {
      throw new EmbeddingError(`${where} did not answer with an embeddings list`);
    }
    const byIndex = new Map(parsed.data.map((d) => [d.index, d.embedding]));
    return input.map((_, i) => {
      const embedding = byIndex.get(i);
      if (!embedding) throw new EmbeddingError(`${where} returned ${parsed.data.length} embeddings for ${input.length} texts`);
      if (embedding.length !== EMBEDDING_DIMENSIONS) {
        throw new EmbeddingError(
          `${where} returned ${embedding.length} dimensions; parley stores ${EMBEDDING_DIMENSIONS} (use a CLIP ViT-L/14 model or one with 768 dimensions)`,
        );
      }
      return unitVector(embedding);
    });
  }

  async function embedBatch(input: readonly string[]): Promise<Float32Array[]> {
    for (let tries = 0; ; tries++) {
      try {
        return await attempt(input);
      } catch (e) {
        if (!(e instanceof RetryableError) || tries >= options.retries)
          throw e instanceof RetryableError ? new EmbeddingError(`${e.message} (after ${tries + 1} attempts)`) : e;
        const backoff = Math.min(baseDelay * 2 ** tries, MAX_DELAY_MS);
        await sleep(e.retryAfterMs ?? backoff / 2 + Math.random() * (backoff / 2));
      }
    }
  }

  return {
    name: `openai-http:${options.model}`,
    description: `OpenAI-compatible embedding server at ${new URL(endpoint).origin}, model ${options.model}`,
    defaultMinScore: 0.2,
    async embed(texts) {
      const out: Float32Array[] = [];
      for (let i = 0; i < texts.length; i += options.batchSize) out.push(...(await embedBatch(texts.slice(i, i + options.batchSize))));
      return out;
    },
  };
}
