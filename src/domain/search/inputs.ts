import { z } from 'zod';

export const searchOrders = ['score', 'createdAt', 'likeCount'] as const;
export const sortDirections = ['desc', 'asc'] as const;
export type SearchOrderBy = (typeof searchOrders)[number];
export type SortDirection = (typeof sortDirections)[number];
const MAX_PAGE = 1_000_000;
const MAX_LIMIT = 100;

/**
 * A whole number from REST's query string ("2") or GraphQL (2); "2.5", "x" or "" are refused
 * with a message naming the range.
 */
const wholeNumber = (min: number, max: number, fallback: number) => {
  const message = `must be a whole number from ${min} to ${max}`;
  return z.preprocess(
    (v) => (typeof v === 'string' && /^\s*-?\d+\s*$/.test(v) ? Number(v) : v),
    z.number({ error: message }).int(message).min(min, message).max(max, message).default(fallback),
  );
};

const idFilter = z
  .string({ error: 'must be a string' })
  .min(1, 'must not be empty')
  .max(200, 'must be at most 200 characters')
  .refine((v) => !v.includes('\u0000'), 'must not contain the NUL character');

/** The search request, as REST's query string and GraphQL's arguments both carry it. */
export const searchInput = z.object({
  query: z
    .string({ error: (issue) => (issue.input === undefined ? 'is required' : 'must be a string') })
    .trim()
    .min(1, 'must not be empty')
    .max(1000, 'must be at most 1000 characters'),
  agentId: idFilter.optional(),
  userId: idFilter.optional(),
  tool: idFilter.optional(),
  page: wholeNumber(1, MAX_PAGE, 1),
  limit: wholeNumber(1, MAX_LIMIT, 20),
  orderBy: z.enum(searchOrders, { error: `must be one of ${searchOrders.join(', ')}` }).default('score'),
  direction: z.enum(sortDirections, { error: `must be one of ${sortDirections.join(', ')}` }).default('desc'),
});

/** The same search without page and limit, for cursor connections. */
export const searchConnectionInput = searchInput.omit({ page: true, limit: true });
export type SearchConnectionInput = z.output<typeof searchConnectionInput>;

const forwardOnly = z.never({ error: 'is not supported: search results page forward, with first and after' }).optional();

/** Relay arguments of the search connection; nulls mean "not given". */
export const connectionPage = z.preprocess(
  (v) => (v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).filter(([, x]) => x != null)) : v),
  z.object({ first: wholeNumber(1, MAX_LIMIT, 20), after: z.string().optional(), last: forwardOnly, before: forwardOnly }),
);
