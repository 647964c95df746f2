import { z } from 'zod';
import { badInput, unprocessable } from './errors.ts';

/**
 * Parses input at the edge of the domain. The first issue becomes a BAD_USER_INPUT error whose
 * path names the field; transports render that path in their own field names.
 * Issues tagged `params: { status: 422 }` are limits the original answered with 422.
 */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol');
  const unprocessableIssue = issue.code === 'custom' && (issue as { params?: { status?: number } }).params?.status === 422;
  throw unprocessableIssue ? unprocessable(issue.message, path) : badInput(issue.message, path);
}

/** Formats an error path for a message: `llm_settings.model_profile`, `images[2].image`. */
export function formatPath(path: readonly (string | number)[], rename: (key: string) => string = (k) => k): string {
  return path.reduce<string>(
    (out, part) => (typeof part === 'number' ? `${out}[${part}]` : out ? `${out}.${rename(part)}` : rename(part)),
    '',
  );
}

/** A message naming the field, e.g. `name: must be at most 100 characters`. */
export function describeInputError(
  message: string,
  path: readonly (string | number)[] | undefined,
  rename?: (key: string) => string,
): string {
  return path && path.length ? `${formatPath(path, rename)}: ${message}` : message;
}

/**
 * The instants the service stores or compares: from the Unix epoch to the last of year 9999.
 * Both databases keep dates past either end, but the driver reads back only four-digit years
 * (later ones come back as invalid dates, and years before 1 fail the statement).
 */
export const FIRST_INSTANT = new Date('1970-01-01T00:00:00.000Z');
export const LAST_INSTANT = new Date('9999-12-31T23:59:59.999Z');

/**
 * How deep free-form JSON (a task's or a tool call's arguments, a `JSON` argument in GraphQL)
 * may nest objects and lists. Serialising, storing and copying JSON recurse once per level, so
 * a value nested thousands deep overflowed the stack; no tool's arguments come near this.
 */
export const MAX_JSON_DEPTH = 32;
export const TOO_DEEP = `must not nest objects and lists more than ${MAX_JSON_DEPTH} levels deep`;

/**
 * Whether `value` nests objects and lists at most `max` levels deep (a scalar is 0 deep, `[1]`
 * one). Walks without recursion and stops at the first level too deep: safe on any input.
 */
export function nestsWithin(value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  const pending: [unknown, number][] = [[value, 0]];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [item, depth] = next;
    if (typeof item !== 'object' || item === null) continue;
    if (depth + 1 > max) return false;
    for (const child of Array.isArray(item) ? item : Object.values(item)) {
      if (typeof child === 'object' && child !== null) pending.push([child, depth + 1]);
    }
  }
  return true;
}

/** Field rules shared by the resources' input schemas. */
export const text = (max: number) => z.string().max(max, `must be at most ${max} characters`);
/** Every URL a user gives: http or https only, so no `javascript:`, `data:` or `file:` link is ever served back. */
export const urlField = z.url({ protocol: /^https?$/, error: 'must be an http or https URL' }).max(2048, 'must be at most 2048 characters');
export const nameField = z.string().trim().min(1, 'must not be empty').max(100, 'must be at most 100 characters');

export const nonEmptyPatch = <T extends Record<string, unknown>>(patch: T, what: string): T => {
  if (Object.values(patch).every((v) => v === undefined)) throw badInput(`No ${what} fields to update in the request`);
  return patch;
};
