import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { openAiProvider } from '../../src/providers/chat/openai.ts';
import { type ChatRequest, ProviderError } from '../../src/domain/core/chat.ts';
import { CallLimitReached, type CallLimits, streamCall } from '../../src/domain/replies/stream-call.ts';
import { type FakeOpenAI, startFakeOpenAI } from '../helpers/fake-openai.ts';

// One model call of a reply, streamed through the real provider client from the fake
// OpenAI-compatible server: what reaches the sink, the tool calls, the usage, and the limits.

let llm: FakeOpenAI;
let provider: ReturnType<typeof openAiProvider>;
let providerConfig: Parameters<typeof openAiProvider>[0];

const request: ChatRequest = {
  model: 'fake-model',
  messages: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Say hello' },
  ],
  tools: [],
  maxTokens: 50,
  reasoningEffort: null,
  agent: { name: 'Muse', key: 'muse', description: '', greeting: '', knowledge: '', suggestions: [] },
};
const roomy: CallLimits = { maxCompletionTokens: 50, maxCallMs: 60_000 };

function collector() {
  const seen = { content: [] as string[], reasoning: [] as string[] };
  return {
    seen,
    sink: { content: (t: string) => seen.content.push(t), reasoning: (t: string) => seen.reasoning.push(t) },
  };
}

beforeAll(async () => {
  llm = await startFakeOpenAI();
  providerConfig = {
    baseUrl: llm.baseUrl,
    apiKey: undefined,
    models: { default: 'fake-model', low: 'fake-model', medium: 'fake-model', high: 'fake-model' },
    contextTokens: 4_000,
    maxCompletionTokens: 50,
    firstTokenTimeoutMs: 10_000,
    idleTimeoutMs: 10_000,
    maxCallMs: 60_000,
    offlineTokenDelayMs: 0,
    checkpointMs: 0,
  };
  provider = openAiProvider(providerConfig);
});
afterAll(() => llm.close());
beforeEach(() => llm.reset());

describe('streamCall', () => {
  it('hands each piece to the sink in order and returns the text, no tool calls, and the reported usage', async () => {
    llm.enqueue({ tokens: ['Hel', 'lo', ' there'], reasoning: ['hmm'], usage: { prompt_tokens: 12, completion_tokens: 4 } });
    const { seen, sink } = collector();
    const called = await streamCall(provider, request, new AbortController().signal, sink, roomy);
    expect(seen).toEqual({ content: ['Hel', 'lo', ' there'], reasoning: ['hmm'] });
    expect(called).toEqual({ written: 'Hello there', calls: [], usage: { prompt: 12, completion: 4 } });
  });

  it('assembles the tool calls the model asked for, and estimates usage a provider did not report', async () => {
    llm.enqueue({
      tokens: ['Let me look.'],
      toolCalls: [
        { id: 'call_a', name: 'search', arguments: '{"q":"riso"}' },
        { id: 'call_b', name: 'image', arguments: '{"prompt":"a zine"}' },
      ],
      usage: null,
    });
    const { sink } = collector();
    const called = await streamCall(provider, request, new AbortController().signal, sink, roomy, 2);
    expect(called.written).toBe('Let me look.');
    expect(called.calls).toEqual([
      { id: 'call_a', name: 'search', arguments: '{"q":"riso"}' },
      { id: 'call_b', name: 'image', arguments: '{"prompt":"a zine"}' },
    ]);
    // About four characters a token: "You are terse." + "Say hello", and "Let me look.".
    expect(called.usage).toEqual({ prompt: 4 + 3, completion: 3 });
  });

  it('cuts off a provider that streams more than the completion limit, charging what it streamed', async () => {
    llm.enqueue({ tokens: Array.from({ length: 300 }, (_, i) => `w${i} `) });
    const { seen, sink } = collector();
    const error = await streamCall(provider, request, new AbortController().signal, sink, { ...roomy, maxCompletionTokens: 20 }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CallLimitReached);
    expect((error as CallLimitReached).message).toBe('The reply was cut off at its limit of 20 tokens');
    expect(seen.content).toHaveLength(20);
    expect((error as CallLimitReached).usage.completion).toBeGreaterThan(0);
  });

  it('cuts off a call that streams steadily past its time limit', async () => {
    llm.enqueue({ tokens: Array.from({ length: 40 }, (_, i) => `w${i} `), delayMs: 50 });
    const { seen, sink } = collector();
    const error = await streamCall(provider, request, new AbortController().signal, sink, { ...roomy, maxCallMs: 300 }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CallLimitReached);
    expect((error as CallLimitReached).message).toBe('The model call ran past its limit of 0.3 s');
    expect(seen.content.length).toBeLessThan(40);
  });

  it("passes the provider's failure on as it is", async () => {
    llm.enqueue({ tokens: ['a', 'b', 'c'], malformedAfter: 1 });
    const { sink } = collector();
    const error = await streamCall(provider, request, new AbortController().signal, sink, roomy).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).message).toBe('The model provider sent a malformed chunk');
  });

  it('refuses a usage report no model could have used, instead of counting it', async () => {
    llm.enqueue({ tokens: ['a', 'b'], usage: { prompt_tokens: 3_000_000_000, completion_tokens: 2 } });
    const { seen, sink } = collector();
    const error = await streamCall(provider, request, new AbortController().signal, sink, roomy).catch((e: unknown) => e);
    expect(error).toMatchObject({ kind: 'malformed', message: expect.stringContaining('usage.prompt_tokens') });
    expect(seen.content).toEqual(['a', 'b']);
  });

  it('stops as soon as the reply is stopped, which is not taken for a limit', async () => {
    llm.enqueue({ tokens: Array.from({ length: 40 }, (_, i) => `w${i} `), delayMs: 30 });
    const stop = new AbortController();
    const pieces: string[] = [];
    const sink = {
      content: (t: string) => {
        pieces.push(t);
        stop.abort(new Error('cancelled by the user'));
      },
    };
    // A limit the first piece comes well within, even on a busy machine (at 100 ms a slow first
    // piece was cut off by the limit): the stop must end the call, and is not taken for a limit.
    const error = await streamCall(provider, request, stop.signal, sink, { ...roomy, maxCallMs: 5_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(CallLimitReached);
    expect(pieces).toEqual(['w0 ']);
  });

  it('keeps the connection for the next call, and gives up one whose body goes on after [DONE]', async () => {
    llm.enqueue({ tokens: ['one'] }, { tokens: ['two'] }, { tokens: ['held'], holdAfterDone: true }, { tokens: ['after'] });
    const call = async () => {
      const { seen, sink } = collector();
      await streamCall(provider, request, new AbortController().signal, sink, roomy);
      return seen.content.join('');
    };
    expect(await call()).toBe('one');
    const afterFirst = llm.connections().made;
    expect(await call()).toBe('two');
    expect(llm.connections().made).toBe(afterFirst);
    // The call is over at [DONE], though the body is not.
    expect(await call()).toBe('held');
    expect(await call()).toBe('after');
    expect(llm.connections().made).toBe(afterFirst + 1);
    await vi.waitFor(() => expect(llm.connections().open).toBe(1), { timeout: 3_000 });
  });

  it('does not blame the provider for a stall of its own: a chunk that came while this process was held up counts', async () => {
    const strict = openAiProvider({ ...providerConfig, idleTimeoutMs: 300 });
    llm.enqueue({ tokens: ['one', ' two', ' three'], delayMs: 50 });
    const { seen, sink } = collector();
    const held = {
      ...sink,
      content(t: string) {
        sink.content(t);
        // This process busy for twice the idle timeout, as on a loaded machine: the provider's
        // next chunk and the idle timer are both due when it comes back.
        if (t === 'one') for (const end = Date.now() + 600; Date.now() < end; );
      },
    };
    const called = await streamCall(strict, request, new AbortController().signal, held, roomy);
    expect(called.written).toBe('one two three');
    expect(seen.content).toEqual(['one', ' two', ' three']);
  });

  it('still ends a call whose provider stops sending, after the idle timeout', async () => {
    const strict = openAiProvider({ ...providerConfig, idleTimeoutMs: 300 });
    llm.enqueue({ tokens: ['so', ' far', ' never'], stallAfter: 2 });
    const { seen, sink } = collector();
    const failed = await streamCall(strict, request, new AbortController().signal, sink, roomy).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(ProviderError);
    expect((failed as ProviderError).message).toMatch(/stopped sending/);
    expect(seen.content).toEqual(['so', ' far']);
  });
});

describe('a whole answer (the service’s own calls: titles, memories)', () => {
  it('asks without streaming and returns the content', async () => {
    llm.enqueue({ tokens: ['A ', 'short ', 'title'] });
    expect(await provider.complete(request, new AbortController().signal)).toBe('A short title');
    expect(llm.requests.at(-1)!.body.stream).toBe(false);
  });

  it('says what went wrong: an HTTP error, a body that is not JSON, a reported error, a provider that never answers', async () => {
    const failure = (script: Parameters<FakeOpenAI['enqueue']>[0], signal = new AbortController().signal) => {
      llm.enqueue(script);
      return provider.complete(request, signal).then(
        () => null,
        (e: ProviderError) => ({ kind: e.kind, message: e.message }),
      );
    };
    expect(await failure({ status: 503 })).toMatchObject({ kind: 'server_error', message: expect.stringContaining('HTTP 503') });
    expect(await failure({ tokens: ['x'], malformedAfter: 0 })).toEqual({
      kind: 'malformed',
      message: 'The model provider sent a malformed answer',
    });
    expect(await failure({ tokens: ['x'], raw: { after: 0, data: '{"error":{"message":"quota exceeded"}}' } })).toEqual({
      kind: 'reported',
      message: 'The model provider reported an error: quota exceeded',
    });
    expect(await failure({ tokens: ['x'], raw: { after: 0, data: '{"choices":"all of them"}' } })).toMatchObject({ kind: 'malformed' });
    // The caller's signal bounds a provider that holds the connection and never answers.
    const stalled = failure({ tokens: ['x'], stallAfter: 0 }, AbortSignal.timeout(200));
    expect(await stalled).toMatchObject({ message: expect.stringMatching(/abort|timeout/i) });
  });
});
