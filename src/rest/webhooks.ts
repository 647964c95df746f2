import { z } from 'zod';
import { feedFamilies } from '../domain/core/feed-events.ts';
import { resumeHeaders, resumePoint, resumeQuery } from './event-stream.ts';
import { feedFrameSchema, streamFeed } from './feed-stream.ts';
import { operation } from './operation.ts';
import {
  restDeliverySchema,
  restRotateBody,
  restWebhookCreateBody,
  restWebhookPatchBody,
  restWebhookEventSchema,
  restWebhookSchema,
  toRestDelivery,
  toRestWebhook,
  toRestWebhookEvent,
  webhookErrors as style,
  webhookNames,
} from './webhook-shapes.ts';

const TAG = 'Webhooks';
const one = z.object({ webhook: restWebhookSchema });
const withSecret = z.object({
  webhook: restWebhookSchema,
  secret: z.string().meta({ description: 'The signing secret (`whsec_…`): shown this once, never again' }),
});
const delivery = z.object({ delivery: restDeliverySchema });
const body = (raw: unknown) => webhookNames.toDomain(raw ?? {}) as never;

export const webhookOperations = [
  operation({
    operationId: 'createWebhook',
    method: 'post',
    path: '/v2/webhooks',
    tag: TAG,
    summary: 'Make an endpoint told of what happens to what you own; its signing secret is in this answer only',
    body: restWebhookCreateBody,
    ok: { json: withSecret },
    created: true,
    errors: { style, codes: ['BAD_USER_INPUT', 'UNPROCESSABLE', 'UNAVAILABLE'] },
    handler: async (request, _reply, { services }) => {
      const made = await services.webhooks.create(request.viewer, body(request.body));
      return { webhook: toRestWebhook(made.webhook), secret: made.secret };
    },
  }),
  operation({
    operationId: 'listWebhooks',
    method: 'get',
    path: '/v2/webhooks',
    tag: TAG,
    summary: 'Your endpoints, newest first',
    ok: { json: z.object({ webhooks: z.array(restWebhookSchema) }) },
    handler: async (request, _reply, { services }) => ({ webhooks: (await services.webhooks.list(request.viewer)).map(toRestWebhook) }),
  }),
  operation({
    operationId: 'streamWebhookEvents',
    method: 'get',
    path: '/v2/webhooks/events',
    tag: TAG,
    summary:
      'Your endpoints turned off by the service (every delivery failed for days), live (SSE); `webhook_id` narrows it to one endpoint of yours; resume with Last-Event-ID or `after`',
    query: resumeQuery.extend({ webhook_id: z.string().optional().meta({ description: 'Only this endpoint of yours' }) }),
    headers: resumeHeaders,
    ok: { events: feedFrameSchema('WebhookStream', restWebhookEventSchema) },
    errors: { style, codes: ['BAD_USER_INPUT', 'NOT_FOUND', 'TOO_MANY_SUBSCRIPTIONS'] },
    handler: async (request, reply, { services, stream }) => {
      const { webhook_id: webhookId } = request.query;
      // Checked before watching (docs/feeds.md): another user's endpoint is not found, as reading it is.
      if (webhookId !== undefined) await services.webhooks.get(request.viewer, webhookId);
      const events = await services.feeds.watch(request.viewer, {
        after: resumePoint(request.headers['last-event-id'], request.query.after),
        types: feedFamilies.webhook,
        where: webhookId === undefined ? undefined : (e) => e.webhookId === webhookId,
      });
      return streamFeed(reply, events, stream, toRestWebhookEvent);
    },
  }),
  operation({
    operationId: 'getWebhook',
    method: 'get',
    path: '/v2/webhooks/:webhookId',
    tag: TAG,
    summary: 'One of your endpoints',
    ok: { json: one },
    errors: { style, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      webhook: toRestWebhook(await services.webhooks.get(request.viewer, request.params.webhookId)),
    }),
  }),
  operation({
    operationId: 'updateWebhook',
    method: 'patch',
    path: '/v2/webhooks/:webhookId',
    tag: TAG,
    summary: 'Change an endpoint (only the fields sent); enabled: true turns one the service turned off on again',
    body: restWebhookPatchBody,
    ok: { json: one },
    errors: { style, codes: ['NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => ({
      webhook: toRestWebhook(await services.webhooks.update(request.viewer, request.params.webhookId, body(request.body))),
    }),
  }),
  operation({
    operationId: 'deleteWebhook',
    method: 'delete',
    path: '/v2/webhooks/:webhookId',
    tag: TAG,
    summary: 'Delete an endpoint, its secret and its delivery log',
    ok: { json: z.object({ success: z.literal(true) }) },
    errors: { style, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      await services.webhooks.remove(request.viewer, request.params.webhookId);
      return { success: true as const };
    },
  }),
  operation({
    operationId: 'rotateWebhookSecret',
    method: 'post',
    path: '/v2/webhooks/:webhookId/rotate',
    tag: TAG,
    summary: 'A new signing secret, shown once; the one it replaces signs beside it for overlap_seconds',
    body: restRotateBody,
    ok: { json: withSecret },
    errors: { style, codes: ['NOT_FOUND', 'BAD_USER_INPUT', 'UNAVAILABLE'] },
    handler: async (request, _reply, { services }) => {
      const rotated = await services.webhooks.rotate(request.viewer, request.params.webhookId, body(request.body));
      return { webhook: toRestWebhook(rotated.webhook), secret: rotated.secret };
    },
  }),
  operation({
    operationId: 'testWebhook',
    method: 'post',
    path: '/v2/webhooks/:webhookId/test',
    tag: TAG,
    summary: 'Send a webhook.test event to this endpoint (whatever event types it lists); the delivery, to follow in the log',
    ok: { json: delivery },
    errors: { style, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      delivery: toRestDelivery(await services.webhooks.test(request.viewer, request.params.webhookId)),
    }),
  }),
  operation({
    operationId: 'listWebhookDeliveries',
    method: 'get',
    path: '/v2/webhooks/:webhookId/deliveries',
    tag: TAG,
    summary: "An endpoint's delivery log, newest first: each event's tries, the last answer and the next try",
    query: z.object({
      limit: z.string().optional().meta({ description: '1 to 100; 50 unless given' }),
      before: z.string().optional().meta({ description: 'A delivery id: the page goes on after it' }),
    }),
    ok: { json: z.object({ deliveries: z.array(restDeliverySchema) }) },
    errors: { style, codes: ['NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const { limit, before } = request.query;
      const deliveries = await services.webhooks.deliveries(request.viewer, request.params.webhookId, {
        limit: limit === undefined ? undefined : /^\d{1,4}$/.test(limit) ? Number(limit) : Number.NaN,
        before,
      });
      return { deliveries: deliveries.map(toRestDelivery) };
    },
  }),
  operation({
    operationId: 'redeliverWebhook',
    method: 'post',
    path: '/v2/webhooks/:webhookId/deliveries/:deliveryId/redeliver',
    tag: TAG,
    summary: "Send a delivery's event again (the same webhook-id, so a receiver that has it drops it); the new delivery",
    ok: { json: delivery },
    errors: { style, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      delivery: toRestDelivery(await services.webhooks.redeliver(request.viewer, request.params.webhookId, request.params.deliveryId)),
    }),
  }),
];
