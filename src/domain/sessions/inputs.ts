import { z } from 'zod';
import { ActorSelection, SessionPermission, WhileReplying } from '../core/vocabulary.ts';
import { text, urlField } from '../core/validation.ts';
import { REACTIONS } from './reactions.ts';

/** Limits of the original service (research notes), kept so integrations see the same 400s. */
export const BUDGET_LIMITS = {
  mannaBudget: { min: 100, max: 50_000 },
  tokenBudget: { min: 1_000, max: 1_000_000 },
  turnBudget: { min: 1, max: 1_000 },
} as const;
export const MAX_CONTENT = 100_000;
export const MAX_ATTACHMENTS = 10;
export const MAX_SESSION_AGENTS = 10;

const between = (name: keyof typeof BUDGET_LIMITS, whole: boolean) => {
  const { min, max } = BUDGET_LIMITS[name];
  const number = z.number({ error: 'must be a number' }).min(min, `must be at least ${min}`).max(max, `must be at most ${max}`);
  return whole ? number.int('must be a whole number') : number;
};

const id = z.string().min(1, 'must not be empty').max(200, 'is too long');

export const budgetSchema = z
  .object({
    mannaBudget: between('mannaBudget', false),
    tokenBudget: between('tokenBudget', true),
    turnBudget: between('turnBudget', true),
  })
  .partial();

/** The original's limit on the wait between autonomous turns. */
export const MAX_REPLY_INTERVAL_S = 3600;

/** Autonomy (`docs/sessions.md`): the three fields together, as the original required them. */
export const autonomySettingsSchema = z.object({
  autoReply: z.boolean({ error: 'must be true or false' }),
  replyInterval: z
    .number({ error: 'must be a number of seconds' })
    .int('must be a whole number of seconds')
    .min(0, 'must be at least 0')
    .max(MAX_REPLY_INTERVAL_S, `must be at most ${MAX_REPLY_INTERVAL_S}`),
  actorSelectionMethod: z.enum(ActorSelection, { error: `must be one of ${Object.values(ActorSelection).join(', ')}` }),
});
export type AutonomySettings = z.output<typeof autonomySettingsSchema>;

/** A session's default (the column's, in the schema): every prompt is answered, none overlaps another's replies. */
export const DEFAULT_WHILE_REPLYING: WhileReplying = WhileReplying.enqueue;

export const whileReplyingSchema = z.enum(WhileReplying, { error: `must be one of ${Object.values(WhileReplying).join(', ')}` });

/** Operation 4: a prompt to an existing session, or a new session with its first prompt. */
export const sendMessageSchema = z.object({
  sessionId: id.optional(),
  content: text(MAX_CONTENT).optional(),
  attachments: z.array(urlField).max(MAX_ATTACHMENTS, `must have at most ${MAX_ATTACHMENTS} attachments`).optional(),
  thinking: z.boolean().optional(),
  agentIds: z
    .array(id)
    .max(MAX_SESSION_AGENTS, `must name at most ${MAX_SESSION_AGENTS} agents`)
    .refine((ids) => new Set(ids).size === ids.length, 'must not name an agent twice')
    .optional(),
  scenario: text(1000).optional(),
  budget: budgetSchema.optional(),
  title: text(1000).optional(),
  extras: z.object({ excludeMemory: z.boolean().optional() }).optional(),
  autonomySettings: autonomySettingsSchema.optional(),
  /** What this prompt does if an agent of the session is still replying; the session's default otherwise. */
  whileReplying: whileReplyingSchema.optional(),
});
export type SendMessageInput = z.output<typeof sendMessageSchema>;

export const reactionSchema = z.object({
  messageId: id,
  reaction: z
    .string()
    .trim()
    .min(1, 'must not be empty')
    .max(32, 'must be at most 32 characters')
    // `❤` without its variation selector is the same heart.
    .transform((r) => (r === '❤' ? '❤️' : r))
    .refine((r) => REACTIONS.includes(r), `must be one of ${REACTIONS.join(' ')}`),
});

export const sessionUserSchema = z.object({
  username: z.string().min(1, 'must not be empty').max(100),
  permission: z.enum(SessionPermission),
});

/**
 * A numbered page of the caller's sessions, as the original's "paginate" plugin took it:
 * `page` from 1, `limit` 25 unless told, and optionally only sessions with one agent (by key).
 */
export const numberedPageSchema = z.object({
  page: z.coerce.number({ error: 'must be a number' }).int('must be a whole number').min(1, 'must be at least 1').max(100000).default(1),
  limit: z.coerce
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(100, 'must be at most 100')
    .default(25),
  agentKey: z.string().min(1).max(100).optional(),
  /** The same filter by the agent's id (the original's threads name agents so). */
  agentId: id.optional(),
});
