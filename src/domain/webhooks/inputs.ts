import { z } from 'zod';
import { text } from '../core/validation.ts';
import { webhookEventTypes } from './events.ts';

const known = new Set<string>(webhookEventTypes);

/** Event types: each one of the list; the unknown ones named together, so one answer says every mistake. */
const eventTypes = z
  .array(z.string(), { error: 'must be a list of event types' })
  .min(1, 'must name at least one event type')
  .max(webhookEventTypes.length * 2, 'names too many event types')
  .superRefine((types, ctx) => {
    const unknown = [...new Set(types.filter((t) => !known.has(t)))];
    if (unknown.length)
      ctx.addIssue({
        code: 'custom',
        message: `${unknown.map((t) => JSON.stringify(t.slice(0, 100))).join(', ')} ${unknown.length === 1 ? 'is not an event type' : 'are not event types'}: use ${webhookEventTypes.join(', ')}`,
      });
  })
  .transform((types) => [...new Set(types)]);

const url = z.string({ error: 'must be a URL' }).min(1, 'must be a URL').max(2048, 'must be at most 2048 characters');

export const createWebhookInput = z.object({
  url,
  eventTypes,
  description: text(500).optional(),
  enabled: z.boolean({ error: 'must be true or false' }).optional(),
});

export const updateWebhookInput = z
  .object({
    url: url.optional(),
    eventTypes: eventTypes.optional(),
    description: text(500).optional(),
    enabled: z.boolean({ error: 'must be true or false' }).optional(),
  })
  .refine((v) => Object.values(v).some((x) => x !== undefined), 'names nothing to change: send url, eventTypes, description or enabled');

/** How long the secret before a rotation still signs: up to a week; 0 ends it at once. */
export const rotateWebhookInput = z.object({
  overlapSeconds: z
    .number({ error: 'must be a number of seconds' })
    .int('must be a whole number of seconds')
    .min(0, 'must not be negative')
    .max(7 * 86_400, 'must be at most a week (604800)')
    .optional(),
});

export type CreateWebhookInput = z.input<typeof createWebhookInput>;
export type UpdateWebhookInput = z.input<typeof updateWebhookInput>;
export type RotateWebhookInput = z.input<typeof rotateWebhookInput>;
