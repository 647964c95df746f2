import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { RestResponse, TestApp, TestUser } from './app.ts';

/** A key in the right format (`pk_<16 alnum>_<43 base64url>`) that was never issued. */
export function unknownWellFormedKey(): string {
  const id = randomBytes(24)
    .toString('base64')
    .replace(/[^A-Za-z0-9]/g, '')
    .padEnd(16, '0')
    .slice(0, 16);
  return `pk_${id}_${randomBytes(32).toString('base64url')}`;
}

/** The same key id as `key`, with a different secret. */
export function withWrongSecret(key: string): string {
  const [prefix, id, secret] = [key.slice(0, 2), key.slice(3, 19), key.slice(20)];
  const other = randomBytes(32).toString('base64url');
  expect(other).not.toBe(secret);
  return `${prefix}_${id}_${other}`;
}

export const badKeys = () =>
  [
    ['missing', null],
    ['empty', ''],
    ['malformed', 'not-a-key'],
    ['malformed (almost the format)', 'pk_short_secret'],
    ['well-formed but unknown', unknownWellFormedKey()],
  ] as const;

/** 401 with exactly `{error: string}` (non-empty). */
export function expectAuthError(res: RestResponse) {
  expect(res.status).toBe(401);
  expect(res.headers.get('content-type') ?? '').toMatch(/application\/json/);
  expect(Object.keys(res.body ?? {})).toEqual(['error']);
  expect(typeof res.body.error).toBe('string');
  expect(res.body.error.length).toBeGreaterThan(0);
}

/** Sends the request with every kind of bad key and checks each is refused with 401 `{error}`. */
export async function expectRejectsBadKeys(t: TestApp, method: string, path: string, body?: unknown) {
  for (const [, key] of badKeys()) {
    const res = await t.rest(method, path, { key, body, headers: key === '' ? { 'x-api-key': '' } : undefined });
    expectAuthError(res);
  }
  return true;
}

/** A plain HTTP request whose body is returned as text, for checks on the raw bytes. */
export async function rawRequest(
  t: TestApp,
  method: string,
  path: string,
  options: { key?: string | null; body?: string; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers['x-api-key'] = options.key;
  const response = await fetch(`${t.url}${path}`, { method, headers, body: options.body });
  const text = await response.text();
  return { status: response.status, text, headers: response.headers };
}

/** No stack frames, source paths or internal error class names in a response body; `context` says which request, in a failure. */
export function expectNoInternals(text: string, context?: string) {
  expect(text, context).not.toMatch(/\n\s*at /);
  expect(text, context).not.toMatch(/\bat [\w.<>]+ \(/);
  expect(text, context).not.toMatch(/\.(ts|js|mjs|cjs):\d+/);
  expect(text, context).not.toMatch(/\/(work|home|src|node_modules|tmp)\//);
  expect(text, context).not.toMatch(/PrismaClient|DomainError|ZodError|FST_ERR|Invalid `prisma/);
}

/** Error body with exactly one key and the given text. */
export function expectError(res: RestResponse, status: number, key: 'error' | 'message', text?: string | RegExp) {
  expect({ status: res.status, keys: Object.keys(res.body ?? {}) }).toEqual({ status, keys: [key] });
  expect(typeof res.body[key]).toBe('string');
  if (typeof text === 'string') expect(res.body[key]).toBe(text);
  else if (text) expect(res.body[key]).toMatch(text);
}

export const viewerOf = (t: TestApp, user: TestUser) => t.services.apiKeys.authenticate(user.apiKey);

/** A user as REST shows references to them (an owner, a model's user): populated, the way the original's clients read them. */
export const creatorRef = (user: TestUser) => ({
  _id: user.id,
  userId: user.id,
  username: user.username,
  userImage: null,
  type: 'user',
  createdAt: isoDate,
  updatedAt: isoDate,
});

export const isoDate = expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
