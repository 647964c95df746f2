import { feedFamilies } from '../../domain/core/feed-events.ts';
import { builder } from '../builder.ts';
import { feedEventInterface, followFeed } from '../feed.ts';

const WebhookFeedEvent = feedEventInterface('WebhookFeedEvent', 'A change the service made to one of your webhook endpoints.', {
  webhook_disabled: {
    name: 'WebhookDisabled',
    description: 'The service turned an endpoint off: every delivery to it failed for days. Nothing is sent to it until you turn it on.',
    fields: (t) => ({
      webhookId: t.exposeID('webhookId', { description: 'The raw id of the endpoint.' }),
      url: t.exposeString('url'),
      reason: t.exposeString('reason'),
      disabledAt: t.field({ type: 'DateTime', resolve: (e) => new Date(e.disabledAt) }),
    }),
  },
});

builder.subscriptionFields((t) => ({
  webhookUpdates: t.field({
    type: WebhookFeedEvent,
    description:
      "Your webhook endpoints turned off by the service (one of yours, given webhookId: another's is NOT_FOUND, as reading it), live; resume with after.",
    args: { webhookId: t.arg.id({ description: 'The raw id of one endpoint of yours.' }), after: t.arg({ type: 'Seq' }) },
    ...followFeed(
      feedFamilies.webhook,
      async ({ webhookId }: { webhookId?: string | number | null; after?: number | null }, viewer, ctx) => {
        if (webhookId == null) return undefined;
        const id = String(webhookId);
        // Checked before watching (docs/feeds.md), as reading it is.
        await ctx.services.webhooks.get(viewer, id);
        return (e) => e.webhookId === id;
      },
    ),
  }),
}));
