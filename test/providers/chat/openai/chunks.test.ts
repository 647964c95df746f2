import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ChatDelta } from '../../../../src/domain/core/chat.ts';
import { readChunk, readChunkBySchema } from '../../../../src/providers/chat/openai/chunks.ts';

// A streamed chunk is recognised by hand when it has the common shape, and by the schema
// otherwise: whatever a provider sends, what is read (or the error it ends the reply with) must
// be what the schema alone would read.

/** What reading a chunk comes to: the deltas handed on and whether it finished, or the error's message. */
function outcome(read: typeof readChunk, data: string) {
  const deltas: ChatDelta[] = [];
  try {
    const finished = read(data, (d) => deltas.push(d));
    return { deltas, finished };
  } catch (e) {
    return { deltas, error: (e as Error).message };
  }
}

/** Absent (undefined is dropped by JSON), or any of the given values. */
const maybe = <T>(...values: fc.Arbitrary<T>[]) => fc.oneof(fc.constant(undefined), fc.constant(null), ...values);
const odd = fc.oneof(fc.integer(), fc.boolean(), fc.constant([]), fc.constant({}), fc.constant('[]'));
const text = maybe(fc.string(), fc.constant('a\u0000b'), fc.constant(''), odd);
const toolCall = fc.record(
  {
    index: fc.oneof(fc.integer({ min: -2, max: 200 }), fc.string()),
    id: text,
    function: maybe(fc.record({ name: text, arguments: text }, { requiredKeys: [] }), odd),
  },
  { requiredKeys: [] },
);
const delta = maybe(
  fc.record(
    {
      content: text,
      reasoning_content: text,
      reasoning: text,
      tool_calls: maybe(fc.array(toolCall, { maxLength: 2 }), odd),
      role: fc.string(),
    },
    { requiredKeys: [] },
  ),
  odd,
);
const choice = fc.oneof(fc.record({ delta, finish_reason: text, index: fc.integer() }, { requiredKeys: [] }), odd);
const chunk = fc.record(
  {
    id: fc.string(),
    choices: maybe(fc.array(choice, { maxLength: 3 }), odd),
    usage: maybe(
      fc.record(
        { prompt_tokens: maybe(fc.integer({ min: -1, max: 20_000_000 }), odd), completion_tokens: maybe(fc.integer()) },
        { requiredKeys: [] },
      ),
      odd,
    ),
    error: maybe(fc.string(), fc.record({ message: text }, { requiredKeys: [] }), odd),
  },
  { requiredKeys: [] },
);

describe('reading a streamed chunk', () => {
  it('reads every chunk as the schema alone would: the same deltas, the same end, the same error', () => {
    fc.assert(
      fc.property(fc.oneof(chunk, odd, fc.constant(null)), (value) => {
        const data = JSON.stringify(value);
        expect(outcome(readChunk, data)).toEqual(outcome(readChunkBySchema, data));
      }),
      { numRuns: 5000 },
    );
  });

  it('reads the common chunk of a token, and ends a reply on one whose text is not text', () => {
    const token = { id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] };
    expect(outcome(readChunk, JSON.stringify(token))).toEqual({ deltas: [{ type: 'content', text: 'Hi' }], finished: false });
    const last = { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] };
    expect(outcome(readChunk, JSON.stringify(last))).toEqual({ deltas: [], finished: true });
    const wrong = { choices: [{ index: 0, delta: { content: 5 } }] };
    expect(outcome(readChunk, JSON.stringify(wrong)).error).toMatch(/unexpected shape \(choices\.0\.delta\.content: .*expected string/);
  });
});
