import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Key format: `pk_<id>_<secret>`. The id (public) finds the row; only SHA-256 of the secret is
 * stored, and it is compared in constant time. Secrets are 256 random bits, so a fast hash is
 * enough: there is nothing to brute-force.
 */
const PREFIX = 'pk';
const keyPattern = /^pk_([A-Za-z0-9]{16})_([A-Za-z0-9_-]{43})$/;

export interface NewKey {
  id: string;
  hash: string;
  preview: string;
  /** Shown to the user once, never stored. */
  plaintext: string;
}

const hashSecret = (secret: string) => createHash('sha256').update(secret).digest('hex');

export function generateKey(): NewKey {
  const id = randomBytes(12).toString('base64url').replace(/[-_]/g, '').padEnd(16, '0').slice(0, 16);
  const secret = randomBytes(32).toString('base64url');
  return { id, hash: hashSecret(secret), preview: `${PREFIX}_${id}_${secret.slice(0, 4)}…`, plaintext: `${PREFIX}_${id}_${secret}` };
}

export function parseKey(plaintext: string): { id: string; secret: string } | null {
  const match = keyPattern.exec(plaintext);
  return match ? { id: match[1]!, secret: match[2]! } : null;
}

export function secretMatches(secret: string, storedHash: string): boolean {
  const actual = Buffer.from(hashSecret(secret), 'hex');
  const expected = Buffer.from(storedHash, 'hex');
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}
