import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { SessionEventOf } from '../../src/domain/core/events.ts';
import { JsonText } from '../../src/http/sse.ts';
import { tokenFrames } from '../../src/rest/session-stream.ts';
import { toRestFrame } from '../../src/rest/session-shapes.ts';
import { mediaLinks } from '../../src/domain/core/media-links.ts';

// A REST stream writes a token's frame from the frame of the token before it (only the text
// differs within a reply): whatever the tokens and however replies interleave, each frame's JSON
// must be the JSON of the frame the event shows on its own.

type Token = SessionEventOf<'assistant_token' | 'assistant_thinking'>;

const id = fc.constantFrom('s1', 's2', 'p1', 'p2', 'm1', 'm2', 'a"1', 'a\u00e91');
const token: fc.Arbitrary<Token> = fc.record({
  type: fc.constantFrom('assistant_token' as const, 'assistant_thinking' as const),
  sessionId: id,
  promptId: id,
  messageId: id,
  agentId: id,
  text: fc.oneof(fc.string(), fc.constantFrom('}}', '"', '\\', '\u2028', 'caf\u00e9 \ud83d\ude00', '')),
  seq: fc.nat(),
  at: fc.constant('2026-11-27T04:00:00.000Z'),
});

const links = mediaLinks(() => 'http://parley.test');
const json = (frame: unknown) => (frame instanceof JsonText ? frame.json : JSON.stringify(frame));

describe("a REST stream's token frames", () => {
  it("are, byte for byte, the JSON of each token's own frame, across replies that interleave", () => {
    fc.assert(
      fc.property(fc.array(token, { minLength: 1, maxLength: 30 }), fc.array(fc.nat(3), { maxLength: 30 }), (tokens, repeats) => {
        const frameOf = tokenFrames(links);
        // Runs of tokens of one reply (what a stream mostly shows), among tokens of others.
        const stream = tokens.flatMap((t, i) => Array.from({ length: 1 + (repeats[i] ?? 0) }, (_, k) => ({ ...t, text: `${t.text}${k}` })));
        for (const t of stream) expect(json(frameOf(t))).toBe(JSON.stringify(toRestFrame(t, new Map(), links)));
      }),
      { numRuns: 500 },
    );
  });
});
