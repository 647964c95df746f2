/** Every embedding parley stores has this many dimensions (the `vector(768)` column; CLIP ViT-L/14). */
export const EMBEDDING_DIMENSIONS = 768;

/** Turns texts into unit-length vectors of one vector space. */
export interface EmbeddingProvider {
  /**
   * Names the vector space. It is stored with every embedding and search compares only vectors
   * of the active provider, so changing provider means re-embedding, never mixing two spaces.
   */
  readonly name: string;
  /** What the start-up line and /healthz say about it. */
  readonly description: string;
  /** Cosine similarity under which a creation does not match a query, unless configured. */
  readonly defaultMinScore: number;
  /** One unit vector per text, in order. */
  embed(texts: readonly string[]): Promise<Float32Array[]>;
}

/** Raised when a provider cannot embed (server down, bad answer); not the caller's fault. */
export class EmbeddingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EmbeddingError';
  }
}

/** Scales a vector to length 1; a zero or non-finite vector has no direction and is refused. */
export function unitVector(values: ArrayLike<number>): Float32Array {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i]! * values[i]!;
  const norm = Math.sqrt(sum);
  if (!Number.isFinite(norm) || norm === 0) throw new EmbeddingError('an embedding must be finite and not all zeros');
  const out = new Float32Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = values[i]! / norm;
  return out;
}
