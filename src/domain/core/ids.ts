import { randomBytes } from 'node:crypto';

/**
 * PostgreSQL text cannot hold the NUL character, so an id containing one names nothing; lookups
 * skip the database for it and answer "not found" like for any other unknown id.
 */
export const canNameARow = (id: string) => !id.includes('\u0000');

/**
 * A new row id in the same form the database gives (UUID version 7: time-ordered), for rows
 * that must know each other's ids before they are written in one statement.
 */
export function newId(): string {
  const bytes = randomBytes(16);
  const ms = Date.now();
  bytes.writeUIntBE(ms, 0, 6);
  bytes[6] = 0x70 | (bytes[6]! & 0x0f);
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * `count` new ids in the form of `newId`, each greater than the one before (the same millisecond,
 * the random tail counted up from a random start): rows written together keep the order they were
 * named in when listed by id.
 */
export function newIds(count: number): string[] {
  const first = newId();
  // The last 12 hex digits are random; with their top bit cleared, adding up to 2^47 cannot overflow.
  const tail = BigInt(`0x${first.slice(-12)}`) & 0x7fffffffffffn;
  return Array.from({ length: count }, (_, i) => `${first.slice(0, -12)}${(tail + BigInt(i)).toString(16).padStart(12, '0')}`);
}
