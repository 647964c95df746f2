import { z } from 'zod';

/** The header whose value is a secret: sealed when given, never shown again. */
export const AUTHORIZATION = 'authorization';

/**
 * Headers the MCP client sets itself (the transport's own, and what HTTP frames): a server's
 * headers may not name them.
 */
const reserved = new Set([
  'accept',
  'connection',
  'content-length',
  'content-type',
  'host',
  'last-event-id',
  'mcp-protocol-version',
  'mcp-session-id',
  'te',
  'transfer-encoding',
  'upgrade',
]);

export const MOST_HEADERS = 20;

/** What an HTTP header's name may hold (RFC 9110's token), at most 100 of them. */
const headerName = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;

/** A value on one line: a line break would start another header. */
const headerValue = z
  .string({ error: 'must be a string, or null to remove it' })
  .min(1, 'must not be empty')
  .max(4096, 'must be at most 4096 characters')
  .regex(/^[^\r\n\0]*$/, 'must be on one line');

/** Header names lower-cased; a reserved one named, so one answer says the mistake. */
const headers = <V extends z.ZodType>(value: V) =>
  z
    .record(z.string(), value, { error: 'must be an object of header names and values' })
    .superRefine((given, ctx) => {
      const names = Object.keys(given);
      if (names.length > MOST_HEADERS) ctx.addIssue({ code: 'custom', message: `must name at most ${MOST_HEADERS} headers` });
      const bad = names.find((n) => !headerName.test(n));
      if (bad !== undefined) ctx.addIssue({ code: 'custom', message: 'must be an HTTP header name (at most 100 characters)', path: [bad] });
      const refused = names.filter((n) => reserved.has(n.toLowerCase()));
      if (refused.length)
        ctx.addIssue({ code: 'custom', message: `${refused.join(', ')}: set by the MCP client itself`, path: [refused[0]!] });
      const lower = names.map((n) => n.toLowerCase());
      if (new Set(lower).size !== lower.length) ctx.addIssue({ code: 'custom', message: 'names a header twice' });
    })
    .transform((given) => Object.fromEntries(Object.entries(given).map(([n, v]) => [n.toLowerCase(), v])) as Record<string, z.output<V>>);

/** Names the model sees before each tool's (`<name>__<tool>`): short, and what a function name may hold. */
const name = z
  .string({ error: 'must be a name' })
  .regex(/^[a-z0-9][a-z0-9_-]{0,23}$/, 'must be 1 to 24 lower-case letters, digits, - or _, starting with a letter or digit')
  .refine((n) => !n.includes('__'), 'must not hold "__" (it separates the server from the tool)');

const url = z.string({ error: 'must be a URL' }).min(1, 'must be a URL').max(2048, 'must be at most 2048 characters');

const price = z
  .number({ error: 'must be a number of manna' })
  .int('must be a whole number of manna')
  .min(0, 'must not be negative')
  .max(1_000_000, 'must be at most 1000000');

export const createMcpServerInput = z.object({
  name,
  url,
  headers: headers(headerValue).optional(),
  pricePerCall: price.optional(),
});

/**
 * Only the fields sent change; `headers` changes only the headers it names (null removes one),
 * the authorization header included.
 */
export const updateMcpServerInput = z
  .object({
    name: name.optional(),
    url: url.optional(),
    headers: headers(headerValue.nullable()).optional(),
    pricePerCall: price.optional(),
  })
  .refine((v) => Object.values(v).some((x) => x !== undefined), 'names nothing to change: send name, url, headers or pricePerCall');

export type CreateMcpServerInput = z.input<typeof createMcpServerInput>;
export type UpdateMcpServerInput = z.input<typeof updateMcpServerInput>;
