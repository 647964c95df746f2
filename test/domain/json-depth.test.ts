import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, nestsWithin } from '../../src/domain/core/validation.ts';
import { parseImportLine } from '../../src/domain/search/import-line.ts';
import { checkArguments } from '../../src/domain/tools/arguments.ts';
import { loadToolRegistry } from '../../src/domain/tools/registry.ts';

const toolsDir = fileURLToPath(new URL('../../tools', import.meta.url));
/** A list within a list `levels` times, around 1, as JSON text (built as text: stringify would overflow). */
const nestedList = (levels: number) => `${'['.repeat(levels)}1${']'.repeat(levels)}`;
const DEEP = 20_000;
const fieldLimit = new RegExp(`must not nest objects and lists more than ${MAX_JSON_DEPTH} levels deep`);

describe('how deep free-form JSON nests', () => {
  const nestedObject = (levels: number) => JSON.parse(`${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`);

  it('is measured without recursion, at any depth, and stops at the first level too deep', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 1_000_000; i++) deep = [deep];
    expect(nestsWithin(deep)).toBe(false);
    expect(nestsWithin(nestedObject(MAX_JSON_DEPTH))).toBe(true);
    expect(nestsWithin(nestedObject(MAX_JSON_DEPTH + 1))).toBe(false);
  });

  it('counts objects and lists alike, and a scalar as no level', () => {
    // An object, a list in it, an object in that, and a list in that: four levels.
    expect(nestsWithin({ a: [1, { b: [] }], c: 'x' }, 4)).toBe(true);
    expect(nestsWithin({ a: [1, { b: [] }], c: 'x' }, 3)).toBe(false);
    expect(nestsWithin('text', 0)).toBe(true);
    expect(nestsWithin(null, 0)).toBe(true);
    expect(nestsWithin([], 0)).toBe(false);
  });
});

describe('free-form JSON nested too deep, read without the app', () => {
  it('in a list argument the model sends are refused with the limit, in words for the model', async () => {
    const trainer = (await loadToolRegistry(toolsDir)).get('flux_lora_trainer')!;
    expect(checkArguments(trainer, `{"images":${nestedList(DEEP)}}`)).toEqual({ error: expect.stringMatching(fieldLimit) });
    expect(checkArguments(trainer, `{"images":${nestedList(MAX_JSON_DEPTH)}}`)).toEqual({ error: expect.stringMatching(fieldLimit) });
    expect(checkArguments(trainer, `{"images":${nestedList(MAX_JSON_DEPTH - 2)}}`)).toMatchObject({ args: { images: expect.any(Array) } });
  });

  it('in a line of a search import are refused, naming the field', () => {
    const line = (args: string) =>
      `{"user":"alice","tool":"flux_dev","name":"n","url":"https://cdn.example.com/a.png","args":{"seed":${args}}}`;
    expect(parseImportLine(line(nestedList(DEEP)))).toEqual({ ok: false, reason: expect.stringMatching(fieldLimit) });
    expect(parseImportLine(line(nestedList(3)))).toMatchObject({ ok: true });
  });
});
