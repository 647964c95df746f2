import { Decimal } from '@prisma/client/runtime/client';
import { describe, expect, it } from 'vitest';
import { isNoManna, mannaFromText, mannaNumber, mannaOf } from '../../src/domain/core/manna.ts';

/** Numbers across every scale a cost expression can reach, the same on every run. */
function spread(count: number): number[] {
  let seed = 50;
  const next = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  return Array.from({ length: count }, () => next() * 10 ** (Math.floor(next() * 30) - 8));
}

// A cost is shown in refusals ("Need 12.5 but only have 3") and given as a JSON number; both
// were written by the ledger's decimals (decimal.js, as Prisma carries it) kept to four places.
// The domain's own amount must read exactly as they did, or a client would see the change.
describe('an amount of manna', () => {
  const edges = [12.5, 5, 0, 0.1 + 0.2, 1.00005, 0.00005, 0.00015, 0.000025, 4.99995, 1e-7, 123456789012.34567, 2 ** 53 + 2];
  const huge = [1e20, 9.99995e20, 1e21, 1.23456789e22, 1.5e300];

  it("is written as the ledger's decimals wrote it, rounded to four places the same way", () => {
    for (const value of [...edges, ...huge, ...spread(5_000)])
      expect([value, mannaOf(value)]).toEqual([value, new Decimal(value).toDecimalPlaces(4).toString()]);
    expect(mannaOf(0.1 + 0.2)).toBe('0.3');
    expect(mannaOf(1.00005)).toBe('1.0001');
    expect(mannaOf(1e21)).toBe('1e+21');
  });

  it('reads a balance as the database gives it, and gives the same JSON number as before', () => {
    for (const text of ['0', '3', '12.5', '12.5000', '0.0001', '9999999999999999.9999', '-2.5']) {
      const decimal = new Decimal(text).toDecimalPlaces(4);
      expect(mannaFromText(text)).toBe(decimal.toString());
      expect(mannaNumber(mannaFromText(text))).toBe(decimal.toNumber());
    }
    expect(`${mannaFromText('9999999999999999.9999')}`).toBe('9999999999999999.9999');
  });

  it('is nothing only at zero, and refuses what is no amount', () => {
    expect(isNoManna(mannaOf(0))).toBe(true);
    expect(isNoManna(mannaOf(0.00004))).toBe(true);
    expect(isNoManna(mannaOf(0.00005))).toBe(false);
    expect(() => mannaOf(-1)).toThrow(RangeError);
    expect(() => mannaOf(Number.NaN)).toThrow(RangeError);
    expect(() => mannaOf(Number.POSITIVE_INFINITY)).toThrow(RangeError);
    expect(() => mannaFromText('12,5')).toThrow(RangeError);
  });
});
