import { EMBEDDING_DIMENSIONS, unitVector, type EmbeddingProvider } from './provider.ts';

/**
 * Words that appear in almost every prompt ("a fox in a garden") and would make everything
 * look alike to a model that only sees shared features.
 */
const stopWords = new Set('a an and are as at be by for from in into is it its of on or the this that to with'.split(' '));

const WORD_WEIGHT = 2;
const NGRAM_WEIGHT = 1;

/** FNV-1a: a fixed, fast 32-bit hash, so the same text gives the same vector in every process. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function words(text: string): string[] {
  return text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w.length > 1 && !stopWords.has(w));
}

/**
 * Feature hashing: each word and each character 3-gram of a word (with boundary marks, so
 * "storm" shares most of its grams with "thunderstorm" and "storms") adds its weight to one of
 * 768 dimensions, with a sign from the hash so that collisions cancel out on average.
 */
export function hashedNgramVector(text: string): Float32Array {
  const v = new Float64Array(EMBEDDING_DIMENSIONS);
  const add = (feature: string, weight: number) => {
    const h = fnv1a(feature);
    v[h % EMBEDDING_DIMENSIONS]! += h & 0x80000000 ? -weight : weight;
  };
  for (const word of words(text)) {
    add(`w:${word}`, WORD_WEIGHT);
    const padded = `<${word}>`;
    for (let i = 0; i + 3 <= padded.length; i++) add(`g:${padded.slice(i, i + 3)}`, NGRAM_WEIGHT);
  }
  // A text with no usable word (empty, or only stop words) still gets a direction of its own.
  if (v.every((x) => x === 0)) add(`empty:${text}`, 1);
  return unitVector(v);
}

/**
 * The offline fallback: useful for finding creations whose name or prompt shares words (or
 * parts of words) with the query. It is not CLIP and knows nothing of meaning: "sea" does not
 * find "ocean".
 */
export const hashedNgramsProvider: EmbeddingProvider = {
  name: 'hashed-ngrams-v1',
  description:
    'built-in hashed word and character n-grams (offline fallback, not CLIP: it matches shared words and spellings, not meaning)',
  defaultMinScore: 0.15,
  embed: async (texts) => texts.map(hashedNgramVector),
};
