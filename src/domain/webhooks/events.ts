/**
 * What a webhook can be told, as `type` in the body it is sent: `{type, timestamp, data}`
 * (`docs/webhooks.md`). A change writes its event with `recordWebhookEvent` in its own
 * transaction, so the two commit or fail together.
 */
export const webhookEventTypes = [
  'reply.completed',
  'reply.failed',
  'trigger.run.completed',
  'trigger.run.failed',
  'task.completed',
  'task.failed',
  'task.cancelled',
  'deployment.stopped',
  'autonomy.stopped',
  'webhook.test',
] as const;

export type WebhookEventType = (typeof webhookEventTypes)[number];

/**
 * An event as a change records it: whose it is, its type, and `data`, the ids of what it reports
 * (and why, where it says). The objects themselves are added as REST shows them, once, before the
 * first try (`WebhookPayloads`).
 */
export interface WebhookEventInput {
  userId: string;
  type: WebhookEventType;
  data: Record<string, unknown>;
}
