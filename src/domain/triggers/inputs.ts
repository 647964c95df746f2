import { z } from 'zod';
import { TriggerSessionTarget } from '../core/vocabulary.ts';
import { text } from '../core/validation.ts';
import { scheduleSchema } from './schedule.ts';

/** Prompt and context together fit in one message (`MAX_CONTENT` of a prompt). */
export const MAX_TRIGGER_PROMPT = 50_000;
export const MAX_TRIGGER_CONTEXT = 50_000;
export const DEFAULT_TRIGGER_NAME = 'Untitled Task';

const name = z.string().trim().min(1, 'must not be empty').max(100, 'must be at most 100 characters');
const prompt = text(MAX_TRIGGER_PROMPT).refine((p) => p.trim() !== '', 'must not be empty');
const id = z.string().min(1, 'must not be empty').max(200, 'is too long');

/** What may be set on a trigger; `minIntervalS` is `TRIGGER_MIN_INTERVAL_S`. */
const fields = (minIntervalS: number) => ({
  name,
  prompt,
  schedule: scheduleSchema(minIntervalS).nullable(),
  sessionTarget: z.enum(TriggerSessionTarget),
  sessionId: id.nullable(),
  context: text(MAX_TRIGGER_CONTEXT).nullable(),
});

/**
 * A new trigger. `schedule` must be given: `null` is a trigger run only by hand, and a misspelt
 * schedule must not pass as one. A session given without a target means `existing`.
 */
export function triggerCreateSchema(minIntervalS: number) {
  const f = fields(minIntervalS);
  return z
    .object({
      name: f.name.default(DEFAULT_TRIGGER_NAME),
      prompt: f.prompt,
      schedule: f.schedule,
      sessionTarget: f.sessionTarget.optional(),
      sessionId: f.sessionId.optional(),
      context: f.context.optional(),
    })
    .transform((input, ctx) => {
      const sessionTarget = input.sessionTarget ?? (input.sessionId ? 'existing' : 'new');
      const sessionId = input.sessionId ?? null;
      if (sessionTarget === 'existing' && !sessionId)
        ctx.addIssue({ code: 'custom', message: 'is required when session_target is existing', path: ['sessionId'] });
      if (sessionTarget === 'new' && sessionId)
        ctx.addIssue({ code: 'custom', message: 'is only taken with session_target existing', path: ['sessionId'] });
      return { ...input, sessionTarget, sessionId, context: input.context ?? null };
    });
}
export type TriggerCreateInput = z.output<ReturnType<typeof triggerCreateSchema>>;

/** A change: only the fields sent. `status` pauses (`paused`) or resumes (`active`). */
export function triggerPatchSchema(minIntervalS: number) {
  const f = fields(minIntervalS);
  return z.object({
    name: f.name.optional(),
    prompt: f.prompt.optional(),
    schedule: f.schedule.optional(),
    sessionTarget: f.sessionTarget.optional(),
    sessionId: f.sessionId.optional(),
    context: f.context.optional(),
    status: z.enum(['active', 'paused'], { error: 'must be active (resume) or paused' }).optional(),
  });
}
export type TriggerPatch = z.output<ReturnType<typeof triggerPatchSchema>>;

/** A page of a trigger's runs, newest first. */
export const runPageSchema = z.object({
  first: z.coerce
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(100, 'must be at most 100')
    .default(20),
  after: z.string().max(200).optional(),
});
