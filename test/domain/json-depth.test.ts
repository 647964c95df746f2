import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, nestsWithin } from '../../src/domain/core/validation.ts';

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
