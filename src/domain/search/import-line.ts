import { createHash } from 'node:crypto';
import { z } from 'zod';
import { EMBEDDING_DIMENSIONS } from './embeddings/provider.ts';
import { describeInputError, nestsWithin, TOO_DEEP, urlField } from '../core/validation.ts';

const noNul = (v: string) => !v.includes('\u0000');
const string = () => z.string({ error: (issue) => (issue.input === undefined ? 'is required' : 'must be a string') });
const url = () => string().pipe(urlField);
/** An object of anything, bounded in depth before it is stored (storing it serialises it, a level at a time). */
const freeJson = () =>
  z
    .record(z.string(), z.unknown())
    .default({})
    .refine((v) => nestsWithin(v), TOO_DEEP);

const line = z.object({
  id: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,100}$/, 'must be 1 to 100 letters, digits or _ . : -')
    .optional(),
  user: string().min(1, 'must name an existing creator (username)').max(100).refine(noNul, 'must not contain NUL'),
  agent: z.string().min(1).max(100).refine(noNul, 'must not contain NUL').nullish(),
  tool: string().min(1, 'must not be empty').max(100).refine(noNul, 'must not contain NUL'),
  name: string().trim().min(1, 'must not be empty').max(500, 'must be at most 500 characters').refine(noNul, 'must not contain NUL'),
  url: url(),
  thumbnail: url().nullish(),
  filename: z.string().max(500).refine(noNul, 'must not contain NUL').nullish(),
  args: freeJson(),
  mediaAttributes: freeJson(),
  public: z.boolean().default(false),
  createdAt: z.iso.datetime({ offset: true, error: 'must be an ISO-8601 date-time' }).optional(),
  embedding: z
    .array(z.number().finite(), { error: `must be an array of ${EMBEDDING_DIMENSIONS} numbers` })
    .length(EMBEDDING_DIMENSIONS, `must have ${EMBEDDING_DIMENSIONS} numbers`)
    .refine((v) => v.some((x) => x !== 0), 'must not be all zeros')
    // Each number finite is not enough: their squares can add up past the largest double, and a
    // vector without a finite length has no direction to search by.
    .refine((v) => Number.isFinite(v.reduce((sum, x) => sum + x * x, 0)), 'must have a finite length (its numbers are too large)')
    .optional(),
  /** The provider whose space `embedding` is in; when it is not the active one, the line is embedded anew. */
  embeddingProvider: z.string().min(1).optional(),
});

export type ImportLine = z.output<typeof line> & { id: string };

/**
 * A line without an `id` gets one derived from its text, so importing the same file again (after
 * an interrupt, say) finds the lines already imported instead of adding them twice.
 */
function lineId(text: string): string {
  const h = createHash('sha256').update(`parley-import:${text}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-b${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** Reads one line of an import file: the creation it describes, or why it cannot be imported. */
export function parseImportLine(text: string): { ok: true; line: ImportLine } | { ok: false; reason: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'not valid JSON' };
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return { ok: false, reason: 'not a JSON object' };
  const parsed = line.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return {
      ok: false,
      reason: describeInputError(
        issue.message,
        issue.path.filter((p): p is string | number => typeof p !== 'symbol'),
      ),
    };
  }
  return { ok: true, line: { ...parsed.data, id: parsed.data.id ?? lineId(text.trim()) } };
}
