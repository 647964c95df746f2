import { type DeliveryView, webhookEventTypes, type WebhookView, type WebhookWithSecret } from '../../domain/webhooks/index.ts';
import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';
import { Creator } from './creator.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';
import { WebhookAttempt } from './webhook-attempt.ts';

/** `reply.completed` → `REPLY_COMPLETED`: the body's `type` is the value. */
export const WebhookEventTypeEnum = builder.enumType('WebhookEventType', {
  description: 'What an endpoint can be told; the body it is sent names it in dotted form (`reply.completed`).',
  values: Object.fromEntries(webhookEventTypes.map((t) => [t.toUpperCase().replaceAll('.', '_'), { value: t }])) as Record<
    string,
    { value: (typeof webhookEventTypes)[number] }
  >,
});

export const WebhookDelivery = builder.objectRef<DeliveryView>('WebhookDelivery').implement({
  description: 'One event bound for one endpoint: its last try, and every try so far.',
  fields: (t) => ({
    rawId: t.exposeID('id', { description: 'The id `redeliverWebhook` takes.' }),
    eventId: t.exposeString('eventId', { description: 'The `webhook-id` header of every try of this event.' }),
    eventType: t.exposeString('eventType'),
    status: t.exposeString('status', { description: 'pending, delivered or failed (given up).' }),
    attempts: t.exposeInt('attempts'),
    lastAttemptAt: t.expose('lastAttemptAt', { type: 'DateTime', nullable: true }),
    statusCode: t.exposeInt('statusCode', { nullable: true }),
    durationMs: t.exposeInt('durationMs', { nullable: true }),
    response: t.exposeString('answer', { nullable: true, description: 'The first bytes (at most 4 KB) of the last answer.' }),
    error: t.exposeString('error', { nullable: true, description: 'Why the last try got no answer.' }),
    nextAttemptAt: t.expose('nextAttemptAt', { type: 'DateTime', nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    tries: t.field({ type: [WebhookAttempt], description: 'Every try so far, the first first.', resolve: (d) => d.tries }),
  }),
});

export const Webhook = builder.objectRef<WebhookView>('Webhook').implement({
  description:
    'An endpoint told of what happens to what you own, signed by the Standard Webhooks specification. Its secret is never shown after it is made or rotated.',
  interfaces: nodeInterfaces,
  fields: (t) => ({
    id: t.globalID({ resolve: (w) => ({ type: 'Webhook', id: w.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    url: t.exposeString('url'),
    description: t.exposeString('description'),
    eventTypes: t.field({ type: [WebhookEventTypeEnum], resolve: (w) => w.eventTypes as never }),
    enabled: t.exposeBoolean('enabled'),
    disabledReason: t.exposeString('disabledReason', { nullable: true, description: 'Why the service turned it off (it kept failing).' }),
    disabledAt: t.expose('disabledAt', { type: 'DateTime', nullable: true, description: 'When the service turned it off.' }),
    failingSince: t.expose('failingSince', { type: 'DateTime', nullable: true }),
    previousSecretUntil: t.expose('previousSecretUntil', { type: 'DateTime', nullable: true }),
    deliveries: t.field({
      type: [WebhookDelivery],
      description: 'Its delivery log, newest first.',
      args: { first: t.arg.int(), before: t.arg.id({ description: 'A delivery rawId: the page goes on after it.' }) },
      resolve: (w, { first, before }, ctx) =>
        ctx.services.webhooks.deliveries(viewerOf(ctx), w.id, {
          limit: first ?? undefined,
          before: before == null ? undefined : String(before),
        }),
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const WebhookWithSecretRef = builder.objectRef<WebhookWithSecret>('WebhookWithSecret').implement({
  description: 'An endpoint and its signing secret, shown this once.',
  fields: (t) => ({
    webhook: t.field({ type: Webhook, resolve: (x) => x.webhook }),
    secret: t.exposeString('secret', { description: '`whsec_…`: keep it; it is never shown again.' }),
  }),
});

builder.objectField(Creator, 'webhooks', (t) =>
  t.field({
    type: [Webhook],
    description: 'Your webhook endpoints, newest first: on your own profile; empty elsewhere.',
    resolve: (user, _args, ctx) => (user.id === viewerOf(ctx).id ? ctx.services.webhooks.list(viewerOf(ctx)) : []),
  }),
);

const CreateWebhookInput = builder.inputType('CreateWebhookInput', {
  fields: (t) => ({
    url: t.string({ required: true, description: 'https, on a public address.' }),
    eventTypes: t.field({ type: [WebhookEventTypeEnum], required: true }),
    description: t.string(),
    enabled: t.boolean(),
  }),
});
const UpdateWebhookInput = builder.inputType('UpdateWebhookInput', {
  fields: (t) => ({
    url: t.string(),
    eventTypes: t.field({ type: [WebhookEventTypeEnum] }),
    description: t.string(),
    enabled: t.boolean({ description: 'true turns on again one the service turned off.' }),
  }),
});

/** GraphQL leaves an input's unset fields out or null; the domain's schema reads only what is there. */
const defined = <T extends object>(input: T) => Object.fromEntries(Object.entries(input).filter(([, v]) => v != null));

builder.mutationFields((t) => ({
  createWebhook: t.field({
    type: WebhookWithSecretRef,
    description: 'Makes an endpoint; its secret is in this answer only.',
    args: { input: t.arg({ type: CreateWebhookInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.webhooks.create(viewerOf(ctx), defined(input) as never),
  }),
  updateWebhook: t.field({
    type: Webhook,
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateWebhookInput, required: true }) },
    resolve: (_root, { id, input }, ctx) => ctx.services.webhooks.update(viewerOf(ctx), String(id), defined(input)),
  }),
  deleteWebhook: t.globalID({
    description: 'Deletes an endpoint and its log; the id it had.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => ({ type: 'Webhook', id: await ctx.services.webhooks.remove(viewerOf(ctx), String(id)) }),
  }),
  rotateWebhookSecret: t.field({
    type: WebhookWithSecretRef,
    description: 'A new secret, shown once; the one it replaces signs beside it for overlapSeconds (a day unless given).',
    args: { id: t.arg.id({ required: true }), overlapSeconds: t.arg.int() },
    resolve: (_root, { id, overlapSeconds }, ctx) =>
      ctx.services.webhooks.rotate(viewerOf(ctx), String(id), overlapSeconds == null ? {} : { overlapSeconds }),
  }),
  testWebhook: t.field({
    type: WebhookDelivery,
    description: 'Sends webhook.test to this endpoint; the delivery.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.services.webhooks.test(viewerOf(ctx), String(id)),
  }),
  redeliverWebhook: t.field({
    type: WebhookDelivery,
    description: "Sends a delivery's event again, with the same webhook-id; the new delivery.",
    args: { id: t.arg.id({ required: true }), deliveryId: t.arg.id({ required: true }) },
    resolve: (_root, { id, deliveryId }, ctx) => ctx.services.webhooks.redeliver(viewerOf(ctx), String(id), String(deliveryId)),
  }),
}));
