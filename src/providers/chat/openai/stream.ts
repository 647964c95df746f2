import type { IncomingMessage } from 'node:http';
import { finished as finishedReading } from 'node:stream';
import type { LlmConfig } from '../../../config.ts';
import { type ChatDelta, type ChatRequest, ProviderError } from '../../../domain/core/chat.ts';
import { SseEventReader, SseEventTooLarge } from '../sse-lines.ts';
import { brief, MAX_CHUNK_CHARS, readChunk, seconds } from './chunks.ts';
import { type Post, streamedRequest } from './http.ts';

/** How long the end of a body may take to come after its [DONE] before the connection is given up. */
const DRAIN_AFTER_DONE_MS = 1_000;

/** How far a streamed answer got: its `[DONE]` read, or a choice of it finished. */
interface Progress {
  done: boolean;
  finished: boolean;
}

/**
 * Reads a streamed body's events to `read` until `[DONE]`, or its end after a choice finished;
 * settles once. A body that ends before either was cut off in the middle of a reply.
 */
function readEvents(body: IncomingMessage, read: (data: string) => void, progress: Progress) {
  return new Promise<void>((resolve, reject) => {
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
      if (progress.done) succeed();
    });
    finishedReading(body, (error) => {
      if (settled) return;
      if (error) return fail(error);
      try {
        events.end();
      } catch (e) {
        return fail(e);
      }
      if (progress.done || progress.finished) succeed();
      else fail(new ProviderError('The connection to the model provider closed in the middle of a reply', true, 'interrupted'));
    });
  });
}

/**
 * One try at a streamed answer: each piece goes to `onDelta` as its chunk is read. A failure is
 * a ProviderError (what `onDelta` throws excepted, passed on as it is), transient (worth trying
 * again) only when it came before the provider's first chunk: after it, the user has seen part
 * of the reply.
 */
export async function streamOnce(
  post: Post,
  config: Pick<LlmConfig, 'firstTokenTimeoutMs' | 'idleTimeoutMs'>,
  request: ChatRequest,
  outer: AbortSignal,
  onDelta: (delta: ChatDelta) => void,
): Promise<void> {
  const controller = new AbortController();
  const abort = () => controller.abort();
  outer.addEventListener('abort', abort, { once: true });
  let timeout: ProviderError | null = null;
  let timer: NodeJS.Timeout | undefined;
  /** Chunks read so far: a timer that fires looks whether one came meanwhile. */
  let chunks = 0;
  const arm = (ms: number, message: string) => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      // Judged once the event loop has read what is waiting: a process held up itself (a busy
      // machine, a long piece of work) finds its timers and the provider's next chunk due
      // together, and timers run first. A chunk read meanwhile has restarted the timer.
      const seen = chunks;
      setImmediate(() => {
        if (chunks !== seen || controller.signal.aborted) return;
        timeout = new ProviderError(message, true, 'timeout');
        controller.abort();
      });
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
  let first = true;
  arm(config.firstTokenTimeoutMs, `The model provider did not answer within ${seconds(config.firstTokenTimeoutMs)}`);
  try {
    const body = await post(streamedRequest(request), controller.signal);
    const progress: Progress = { done: false, finished: false };
    const read = (data: string) => {
      if (progress.done) return;
      chunks++;
      // The idle timer is set at the first chunk, and each later one restarts it: a new timer
      // and message for every token would be work for nothing.
      if (first) {
        first = false;
        arm(config.idleTimeoutMs, `The model provider stopped sending for ${seconds(config.idleTimeoutMs)} in the middle of a reply`);
      } else timer?.refresh();
      if (data.trim() === '[DONE]') {
        progress.done = true;
        return;
      }
      if (readChunk(data, hand)) progress.finished = true;
    };
    await readEvents(body, read, progress);
  } catch (e) {
    if (callerThrew) throw e;
    const failure = providerFailure(e, timeout, outer);
    throw first || !(failure instanceof ProviderError) || !failure.transient
      ? failure
      : new ProviderError(failure.message, false, failure.kind);
  } finally {
    clearTimeout(timer);
    outer.removeEventListener('abort', abort);
  }
}

/** What a failed try comes to: the timeout that cut it, the caller's abort as it is, or a ProviderError. */
function providerFailure(e: unknown, timeout: ProviderError | null, outer: AbortSignal): unknown {
  if (timeout) return timeout;
  if (outer.aborted || e instanceof ProviderError) return e;
  if (e instanceof SseEventTooLarge)
    return new ProviderError(`The model provider sent a chunk longer than ${e.limit} characters`, false, 'malformed');
  return new ProviderError(`Could not reach the model provider (${brief((e as Error).message)})`, true, 'unreachable');
}
