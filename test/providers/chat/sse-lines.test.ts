import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SseEventReader, SseEventTooLarge } from '../../../src/providers/chat/sse-lines.ts';

// The provider's event reader against the plain reading of the SSE format (whole body at once),
// for bodies cut into chunks anywhere: inside a line, a CRLF, or a UTF-8 character.

/** The events of a whole body, read the simplest way. */
function reference(body: string): string[] {
  const events: string[] = [];
  let data: string[] = [];
  for (const line of body.split(/\r\n|\r|\n/)) {
    if (line === '') {
      if (data.length) events.push(data.join('\n'));
      data = [];
    } else if (line.startsWith('data:')) data.push(line.slice(line[5] === ' ' ? 6 : 5));
  }
  if (data.length) events.push(data.join('\n'));
  return events;
}

async function* chunks(bytes: Uint8Array, cuts: number[]) {
  let at = 0;
  for (const cut of [...new Set(cuts)].sort((a, b) => a - b)) {
    yield bytes.slice(at, cut);
    at = cut;
  }
  yield bytes.slice(at);
}

/** Pushes a body's chunks through the reader: the events seen, and what it threw (if it did). */
async function readAll(body: AsyncIterable<Uint8Array>, max = 1_000_000) {
  const seen: string[] = [];
  const reader = new SseEventReader(max, (data) => seen.push(data));
  try {
    for await (const chunk of body) reader.push(chunk);
    reader.end();
  } catch (error) {
    return { seen, error };
  }
  return { seen, error: null };
}

async function read(body: AsyncIterable<Uint8Array>, max = 1_000_000) {
  const { seen, error } = await readAll(body, max);
  if (error) throw error;
  return seen;
}

const line = fc.oneof(
  fc.string({ unit: fc.constantFrom('a', 'é', '😀', ' ', ':', '{', '"') }).map((s) => `data: ${s}`),
  fc.string({ unit: fc.constantFrom('a', 'x') }).map((s) => `data:${s}`),
  fc.constant(''),
  fc.constant(': keep-alive'),
  fc.constant('event: update'),
);
const eol = fc.constantFrom('\n', '\r\n', '\r');

describe('SseEventReader', () => {
  it('reads the same events however the body is cut into chunks, with any line endings', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(line, eol), { maxLength: 30 }), fc.array(fc.nat(), { maxLength: 12 }), async (lines, cuts) => {
        const body = lines.map(([l, e]) => l + e).join('');
        const bytes = new TextEncoder().encode(body);
        expect(
          await read(
            chunks(
              bytes,
              cuts.map((c) => c % (bytes.length + 1)),
            ),
          ),
        ).toEqual(reference(body));
      }),
      { numRuns: 300 },
    );
  });

  it('hands on every event of a chunk that holds many', async () => {
    const body = Array.from({ length: 2_000 }, (_, i) => `data: {"n":${i}}\n\n`).join('');
    const events = await read(chunks(new TextEncoder().encode(body), []));
    expect(events).toHaveLength(2_000);
    expect(events.at(-1)).toBe('{"n":1999}');
  });

  it('refuses an event past the limit, after the events before it, even one that never ends its line', async () => {
    const long = `data: ok\n\ndata: ${'x'.repeat(200)}\n\ndata: after\n\n`;
    const { seen, error } = await readAll(chunks(new TextEncoder().encode(long), []), 100);
    expect(error).toBeInstanceOf(SseEventTooLarge);
    expect(seen).toEqual(['ok']);
    await expect(read(chunks(new TextEncoder().encode(`data: ${'y'.repeat(500)}`), [50, 150, 300]), 100)).rejects.toBeInstanceOf(
      SseEventTooLarge,
    );
  });
});
