import { z } from 'zod';
import type { FeedEventOf } from '../domain/core/feed-events.ts';
import { type AttemptView, type DeliveryView, webhookEventTypes, type WebhookView } from '../domain/webhooks/index.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { fieldNames } from './field-names.ts';

/** A webhook's REST names: snake_case, as the rest of `/v2`. */
export const webhookNames = fieldNames({ eventTypes: 'event_types', overlapSeconds: 'overlap_seconds', limit: 'limit', before: 'before' });

export const webhookErrors: RestErrorStyle = { bodyKey: 'error', fieldName: webhookNames.toRest };

const eventType = z.enum(webhookEventTypes);

export const restWebhookSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    description: z.string(),
    event_types: z.array(z.string()),
    enabled: z.boolean(),
    disabled_reason: z.string().nullable().meta({ description: 'Why the service turned it off (it kept failing); null otherwise' }),
    disabled_at: z.string().nullable().meta({ description: 'When the service turned it off; null otherwise' }),
    failing_since: z.string().nullable().meta({ description: 'Since when every delivery has failed; null while they arrive' }),
    previous_secret_until: z.string().nullable().meta({ description: 'Until when the secret before the last rotation still signs' }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Webhook' });

const restAttemptSchema = z
  .object({
    attempt: z.number().int().meta({ description: '1 for the first try of this delivery' }),
    at: z.string(),
    status_code: z.number().int().nullable(),
    duration_ms: z.number().int(),
    response: z.string().nullable().meta({ description: 'The first bytes (at most 4 KB) of the answer' }),
    error: z.string().nullable().meta({ description: 'Why there was no answer' }),
    next_attempt_at: z.string().nullable().meta({ description: 'When the next try was due after this one; null after the last' }),
  })
  .meta({ id: 'WebhookAttempt' });

export const restDeliverySchema = z
  .object({
    id: z.string(),
    webhook_id: z.string(),
    event_id: z.string().meta({ description: 'The `webhook-id` header of every try of this event' }),
    event_type: z.string(),
    status: z.enum(['pending', 'delivered', 'failed']),
    attempts: z.number().int(),
    last_attempt_at: z.string().nullable(),
    status_code: z.number().int().nullable(),
    duration_ms: z.number().int().nullable(),
    response: z.string().nullable().meta({ description: 'The first bytes (at most 4 KB) of the last answer' }),
    error: z.string().nullable().meta({ description: 'Why the last try got no answer' }),
    next_attempt_at: z.string().nullable(),
    createdAt: z.string(),
    tries: z.array(restAttemptSchema).meta({ description: 'Every try so far, the first first' }),
  })
  .meta({ id: 'WebhookDelivery' });

/** An endpoint of yours turned off, as REST streams your feed's webhook events. */
export const restWebhookEventSchema = z
  .object({
    type: z.literal('webhook_disabled'),
    webhook_id: z.string(),
    url: z.string(),
    reason: z.string(),
    disabled_at: z.string(),
  })
  .meta({ id: 'WebhookFeedEvent' });

const iso = (d: Date | null) => d?.toISOString() ?? null;

export const toRestWebhook = (w: WebhookView): z.infer<typeof restWebhookSchema> => ({
  id: w.id,
  url: w.url,
  description: w.description,
  event_types: w.eventTypes,
  enabled: w.enabled,
  disabled_reason: w.disabledReason,
  disabled_at: iso(w.disabledAt),
  failing_since: iso(w.failingSince),
  previous_secret_until: iso(w.previousSecretUntil),
  createdAt: w.createdAt.toISOString(),
  updatedAt: w.updatedAt.toISOString(),
});

export const toRestDelivery = (d: DeliveryView): z.infer<typeof restDeliverySchema> => ({
  id: d.id,
  webhook_id: d.webhookId,
  event_id: d.eventId,
  event_type: d.eventType,
  status: d.status,
  attempts: d.attempts,
  last_attempt_at: iso(d.lastAttemptAt),
  status_code: d.statusCode,
  duration_ms: d.durationMs,
  response: d.answer,
  error: d.error,
  next_attempt_at: iso(d.nextAttemptAt),
  createdAt: d.createdAt.toISOString(),
  tries: d.tries.map(toRestAttempt),
});

const toRestAttempt = (a: AttemptView): z.infer<typeof restAttemptSchema> => ({
  attempt: a.attempt,
  at: a.at.toISOString(),
  status_code: a.statusCode,
  duration_ms: a.durationMs,
  response: a.answer,
  error: a.error,
  next_attempt_at: iso(a.nextAttemptAt),
});

export const toRestWebhookEvent = (e: FeedEventOf<'webhook_disabled'>): z.infer<typeof restWebhookEventSchema> => ({
  type: e.type,
  webhook_id: e.webhookId,
  url: e.url,
  reason: e.reason,
  disabled_at: e.disabledAt,
});

export const restWebhookCreateBody = z.object({
  url: z.string().meta({ description: 'https, on a public address (`docs/webhooks.md`)' }),
  event_types: z.array(eventType).min(1),
  description: z.string().max(500).optional(),
  enabled: z.boolean().optional(),
});

export const restWebhookPatchBody = restWebhookCreateBody.partial();

export const restRotateBody = z.object({
  overlap_seconds: z
    .number()
    .int()
    .min(0)
    .max(604_800)
    .optional()
    .meta({ description: 'How long the secret it replaces still signs beside it (a day unless given; 0: not at all)' }),
});
