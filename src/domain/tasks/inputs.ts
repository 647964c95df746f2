import { z } from 'zod';
import { TaskStatus } from '../core/vocabulary.ts';
import { FIRST_INSTANT, LAST_INSTANT, nestsWithin, TOO_DEEP } from '../core/validation.ts';

export const taskStatuses = Object.values(TaskStatus);
export const taskOrders = ['createdAt', 'updatedAt'] as const;
export const outputTypes = ['image', 'video', 'audio', 'text', 'lora', 'model'] as const;
/** The original's two kinds of task: trainings make concepts (LoRAs), every other tool makes creations. */
export const taskTypes = ['creations', 'concepts'] as const;
export type TaskOrderBy = (typeof taskOrders)[number];
export type OutputType = (typeof outputTypes)[number];

const MAX_PAGE = 1_000_000;
export const MAX_TASK_PAGE = 100;
/** Ids one list may name. */
const MAX_IDS = 100;
/** Arguments of one task, as JSON text: room for every parameter of any tool, and no more. */
export const MAX_ARGS_BYTES = 64 * 1024;

const wholeNumber = (min: number, max: number, fallback: number) => {
  const message = `must be a whole number from ${min} to ${max}`;
  return z.preprocess(
    (v) => (typeof v === 'string' && /^\s*-?\d+\s*$/.test(v) ? Number(v) : v),
    z.number({ error: message }).int(message).min(min, message).max(max, message).default(fallback),
  );
};

const text = z
  .string({ error: 'must be a string' })
  .min(1, 'must not be empty')
  .max(200, 'must be at most 200 characters')
  .refine((v) => !v.includes('\u0000'), 'must not contain the NUL character');

/** One value or several: repeated in a query string (`?status=a&status=b`), comma-separated, or a list. */
const oneOrMany = <T extends z.ZodType>(item: T) =>
  z.preprocess(
    (v) => (typeof v === 'string' ? v.split(',').map((s) => s.trim()) : v),
    z
      .array(item, { error: 'must be a string or a list of strings' })
      .min(1, 'must not be empty')
      .max(MAX_IDS, `must name at most ${MAX_IDS}`),
  );

const enumOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `must be one of ${values.join(', ')}` });

/** `POST /v2/tasks/create` and `createTask`: a tool of the registry and its arguments. */
export const createTaskSchema = z.object({
  tool: z
    .string({ error: (issue) => (issue.input === undefined ? 'is required' : 'must be a string') })
    .min(1, 'must not be empty')
    .max(100),
  args: z
    .record(z.string(), z.unknown(), { error: 'must be an object of the tool’s arguments' })
    .default({})
    // Before anything that walks them (measuring them is serialising them).
    .refine((args) => nestsWithin(args), { message: TOO_DEEP, abort: true })
    .refine((args) => Buffer.byteLength(JSON.stringify(args)) <= MAX_ARGS_BYTES, `must be at most ${MAX_ARGS_BYTES} bytes of JSON`),
  makePublic: z.boolean({ error: 'must be true or false' }).default(false),
});
export type CreateTaskInput = z.output<typeof createTaskSchema>;

/** `POST /v2/tasks/cancel` and `cancelTask`. */
export const cancelTaskSchema = z.object({
  taskId: z
    .string({ error: (issue) => (issue.input === undefined ? 'is required' : 'must be a string') })
    .min(1, 'must not be empty')
    .max(200),
});

/** The estimate takes the same tool and arguments; making it public changes no price. */
export const costTaskSchema = createTaskSchema.omit({ makePublic: true });

/** The filters of `GET /v2/tasks` and of GraphQL's `tasks`, as the original took them. */
export const taskFilterSchema = z.object({
  status: oneOrMany(enumOf(taskStatuses as [TaskStatus, ...TaskStatus[]])).optional(),
  taskId: oneOrMany(text).optional(),
  type: enumOf(taskTypes).optional(),
  outputType: enumOf(outputTypes).optional(),
  tool: text.optional(),
  sessionId: text.optional(),
  minDate: z
    .preprocess(
      (v) => (typeof v === 'string' && v.trim() !== '' ? new Date(v) : v),
      z.date({ error: 'must be a date and time (ISO 8601), such as 2026-01-31T00:00:00Z' }),
    )
    .refine((d) => !Number.isNaN(d.getTime()), 'must be a date and time (ISO 8601), such as 2026-01-31T00:00:00Z')
    // A bound, not a stored date: outside the instants the database reads back (a year before 1
    // failed the statement), the same tasks are selected by the nearest end.
    .transform((d) => new Date(Math.min(Math.max(d.getTime(), FIRST_INSTANT.getTime()), LAST_INSTANT.getTime())))
    .optional(),
  orderBy: enumOf(taskOrders).default('createdAt'),
  direction: z
    .preprocess((v) => (v === '-1' || v === -1 ? 'desc' : v === '1' || v === 1 ? 'asc' : v), enumOf(['desc', 'asc'] as const))
    .default('desc'),
});
export type TaskFilterInput = z.output<typeof taskFilterSchema>;

/** A numbered page of tasks (the original's paginate page). */
export const taskPageSchema = taskFilterSchema.extend({
  page: wholeNumber(1, MAX_PAGE, 1),
  limit: wholeNumber(1, MAX_TASK_PAGE, 20),
});

const forwardOnly = z.never({ error: 'is not supported: tasks page forward, with first and after' }).optional();

/** Forward pages for a connection: `first` after a cursor. */
export const taskConnectionPage = z.object({
  first: wholeNumber(1, MAX_TASK_PAGE, 20),
  after: z.string().max(200).optional(),
  last: forwardOnly,
  before: forwardOnly,
});
