import { feedFamilies } from '../../domain/core/feed-events.ts';
import { builder } from '../builder.ts';
import { feedEventInterface, followFeed } from '../feed.ts';
import { DeploymentStateEnum } from './deployment.ts';
import { DeploymentPlatformEnum } from './enums.ts';

const DeploymentEvent = feedEventInterface('DeploymentEvent', 'A change of state of one of your deployments.', {
  deployment_state: {
    name: 'DeploymentStateChanged',
    description:
      'A deployment was deployed, changed, stopped or deleted (its last state), or stopped by itself because the platform refused its secrets (INVALID, with why in lastError).',
    fields: (t) => ({
      deploymentId: t.exposeID('deploymentId', { description: 'The raw id of the deployment.' }),
      agentId: t.exposeID('agentId', { description: 'The raw id of its agent.' }),
      platform: t.field({ type: DeploymentPlatformEnum, resolve: (e) => e.platform }),
      state: t.field({ type: DeploymentStateEnum, resolve: (e) => e.state }),
      valid: t.exposeBoolean('valid'),
      lastError: t.exposeString('lastError', { nullable: true, description: 'What it last failed at (never a secret).' }),
      deleted: t.exposeBoolean('deleted', {
        description: 'The deployment was deleted: this is its last event, with the state it ended in.',
      }),
    }),
  },
});

builder.subscriptionFields((t) => ({
  deploymentUpdates: t.field({
    type: DeploymentEvent,
    description:
      "Changes of state of your deployments (of one agent of yours, given agentId: another's is FORBIDDEN, as for listing its deployments), live; resume with after.",
    args: { agentId: t.arg.id(), after: t.arg({ type: 'Seq' }) },
    ...followFeed(
      feedFamilies.deployment,
      async ({ agentId }: { agentId?: string | number | null; after?: number | null }, viewer, ctx) => {
        if (agentId == null) return undefined;
        const agent = String(agentId);
        // Checked before watching (docs/feeds.md), as GET /v2/agents/{id}/deployments checks it.
        await ctx.services.deployments.listForAgent(viewer, agent);
        return (e) => e.agentId === agent;
      },
    ),
  }),
}));
