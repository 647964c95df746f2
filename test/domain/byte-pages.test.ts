import { describe, expect, it } from 'vitest';
import { numberedCut, rowsThatFit } from '../../src/domain/core/byte-pages.ts';

describe('pages bounded in bytes', () => {
  it('a page stops before the budget, but always holds one row, even one larger than the budget', () => {
    expect(rowsThatFit([40, 40, 40], 10, 100)).toBe(2);
    expect(rowsThatFit([500, 10], 10, 100)).toBe(1);
    expect(rowsThatFit([10, 10, 10], 2, 100)).toBe(2);
    expect(rowsThatFit([], 5, 100)).toBe(0);
  });

  it('numbered pages of one limit tile the list: every row on exactly one page, in order, whatever the sizes', () => {
    const sizes = [30, 90, 10, 10, 200, 5, 5, 5, 60, 60, 60, 1];
    for (const limit of [1, 2, 3, 5, 20]) {
      const first = numberedCut(sizes, 1, limit, 100);
      const seen: number[] = [];
      for (let page = 1; page <= first.pages; page++) {
        const cut = numberedCut(sizes, page, limit, 100);
        expect(cut.pages).toBe(first.pages);
        expect(cut.start).toBe(seen.length);
        expect(cut.end - cut.start).toBeGreaterThan(0);
        expect(cut.end - cut.start).toBeLessThanOrEqual(limit);
        const bytes = sizes.slice(cut.start, cut.end).reduce((a, b) => a + b, 0);
        if (cut.end - cut.start > 1) expect(bytes).toBeLessThanOrEqual(100);
        for (let i = cut.start; i < cut.end; i++) seen.push(i);
      }
      expect(seen).toEqual(sizes.map((_, i) => i));
      expect(numberedCut(sizes, first.pages + 1, limit, 100)).toEqual({ start: sizes.length, end: sizes.length, pages: first.pages });
    }
  });

  it('small rows page by the limit alone, as numbered pages do without a budget', () => {
    const sizes = Array.from({ length: 7 }, () => 1);
    expect(numberedCut(sizes, 2, 3, 100)).toEqual({ start: 3, end: 6, pages: 3 });
    expect(numberedCut([], 1, 3, 100)).toEqual({ start: 0, end: 0, pages: 1 });
  });
});
