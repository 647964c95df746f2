import { describe, expect, it } from 'vitest';
import { hashedNgramsProvider, hashedNgramVector } from '../../src/domain/search/embeddings/hashed-ngrams.ts';

const norm = (v: ArrayLike<number>) => Math.hypot(...Array.from(v));
const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => Array.from(a).reduce((s, x, i) => s + x * b[i]!, 0);

describe('built-in hashed n-gram embeddings', () => {
  it('give the same 768-dimension unit vector for the same text, in any process', async () => {
    const [a, b] = await hashedNgramsProvider.embed(['A fox reading under a streetlamp', 'A fox reading under a streetlamp']);
    expect(a).toHaveLength(768);
    expect(Array.from(a!)).toEqual(Array.from(b!));
    expect(norm(a!)).toBeCloseTo(1, 5);
    // Pinned: a change to the features would silently change every stored vector's meaning.
    expect(
      Array.from(hashedNgramVector('fox'))
        .filter((x) => x !== 0)
        .map((x) => x.toFixed(4)),
    ).toMatchSnapshot();
  });

  it('rank texts sharing words or word parts above unrelated ones, and say they are not CLIP', () => {
    const query = hashedNgramVector('thunderstorms');
    expect(cosine(query, hashedNgramVector('a lighthouse in a thunderstorm'))).toBeGreaterThan(0.3);
    expect(cosine(query, hashedNgramVector('koi fish circling a full moon'))).toBeLessThan(hashedNgramsProvider.defaultMinScore);
    // Accents and case do not matter; stop words carry no weight.
    expect(cosine(hashedNgramVector('Café'), hashedNgramVector('a cafe'))).toBeCloseTo(1, 5);
    expect(hashedNgramsProvider.description).toMatch(/not CLIP/);
  });

  it('give empty and stop-word-only texts a direction of their own', () => {
    for (const text of ['', 'the of a']) expect(norm(hashedNgramVector(text))).toBeCloseTo(1, 5);
  });
});
