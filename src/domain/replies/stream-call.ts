import type { ChatProvider, ChatRequest } from '../core/chat.ts';
import { estimateTokens } from './tokens.ts';
import type { RequestedToolCall } from '../core/tool-host.ts';

/** Bounds on one model call, whatever the provider does with what it was asked. */
export interface CallLimits {
  /** Completion tokens one call may stream (the service asks the provider for no more than this). */
  maxCompletionTokens: number;
  /** Time one call may stream for, from the request to its last chunk. */
  maxCallMs: number;
}

/** A model call went past a bound of `CallLimits`; the message says which, for the user. */
export class CallLimitReached extends Error {
  override name = 'CallLimitReached';
  /** What the call used until it was cut off, charged like any other. */
  usage: StreamedCall['usage'] = { prompt: 0, completion: 0 };
}

export interface StreamedCall {
  /** The content this call wrote. */
  written: string;
  /** The tools it asked for, in the order it asked. */
  calls: RequestedToolCall[];
  usage: { prompt: number; completion: number };
}

export interface CallSink {
  content(text: string): void;
  /** Reasoning, when the reply shows it. */
  reasoning?(text: string): void;
}

interface PartialCall {
  id?: string;
  name?: string;
  arguments: string;
}

/**
 * Streams one model call: content and reasoning go to `sink` as they arrive, tool calls are
 * assembled from their pieces, and usage is what the provider reported (an estimate when it
 * reports none: a call is never free). `callIndex` names tool calls that came without an id.
 */
export async function streamCall(
  provider: ChatProvider,
  request: ChatRequest,
  signal: AbortSignal,
  sink: CallSink,
  limits: CallLimits,
  callIndex = 0,
): Promise<StreamedCall> {
  const overtime = new AbortController();
  const timer = setTimeout(
    () => overtime.abort(new CallLimitReached(`The model call ran past its limit of ${Math.round(limits.maxCallMs / 100) / 10} s`)),
    limits.maxCallMs,
  );
  const parts: PartialCall[] = [];
  let written = '';
  let chunks = 0;
  const reported = { seen: false, prompt: 0, completion: 0 };
  try {
    await provider.stream(request, AbortSignal.any([signal, overtime.signal]), (delta) => {
      if (delta.type === 'usage') {
        reported.seen = true;
        reported.prompt += delta.promptTokens;
        reported.completion += delta.completionTokens;
        return;
      }
      if (delta.type === 'tool_call') {
        const part = (parts[delta.index] ??= { arguments: '' });
        if (delta.id) part.id = delta.id;
        if (delta.name) part.name = delta.name;
        if (delta.arguments) part.arguments += delta.arguments;
        return;
      }
      // A streamed chunk holds at least one token, so counting chunks never cuts a model that keeps to the limit short.
      if (++chunks > limits.maxCompletionTokens)
        throw new CallLimitReached(`The reply was cut off at its limit of ${limits.maxCompletionTokens} tokens`);
      if (delta.type === 'content') {
        written += delta.text;
        sink.content(delta.text);
      } else sink.reasoning?.(delta.text);
    });
  } catch (e) {
    const cut = overtime.signal.aborted && !signal.aborted ? overtime.signal.reason : e;
    if (cut instanceof CallLimitReached) cut.usage = estimate(request, written);
    throw cut;
  } finally {
    clearTimeout(timer);
  }
  const usage = reported.seen ? { prompt: reported.prompt, completion: reported.completion } : estimate(request, written);
  const calls = parts
    .filter((c) => c)
    .map((c, i) => ({ id: c.id ?? `call_${callIndex}_${i}`, name: c.name ?? '', arguments: c.arguments }));
  return { written, calls, usage };
}

/** Providers that do not report usage are charged an estimate, never nothing. */
const estimate = (request: ChatRequest, written: string) => ({
  prompt: request.messages.reduce((n, m) => n + estimateTokens(m.content ?? ''), 0),
  completion: estimateTokens(written),
});
