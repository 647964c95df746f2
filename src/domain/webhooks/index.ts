/**
 * The webhooks service's front: endpoints a user owns, their signed deliveries on the job queue
 * and their log (`docs/webhooks.md`). A change records its event with `recordWebhookEvent` in its
 * own transaction.
 */
export { webhookEventTypes, type WebhookEventType, type WebhookEventInput } from './events.ts';
export type { CreateWebhookInput, RotateWebhookInput, UpdateWebhookInput } from './inputs.ts';
export { DELIVERY_NOT_FOUND, WEBHOOK_NOT_FOUND, type WebhookService, type WebhookWithSecret, webhookService } from './service.ts';
export { MAX_ANSWER_BYTES, WEBHOOK_QUEUE, type WebhookDeliveries, webhookDeliveries } from './delivery.ts';
export type { AttemptView, DeliveryView, WebhookView } from './store.ts';
export type { Sealer, WebhookPayloads, WebhookRequest, WebhookResponse, WebhookSender } from './ports.ts';
export { prismaDeliveryStore, prismaWebhookStore, recordWebhookEvent, recordWebhookEvents, webhookSealedRows } from './prisma-store.ts';
