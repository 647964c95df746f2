import type { Deployment as DeploymentRow } from '../../generated/prisma/client.ts';
import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';
import { DeploymentPlatformEnum } from './enums.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

export const Deployment = builder.prismaObject('Deployment', {
  interfaces: nodeInterfaces,
  description: 'An agent deployed to a platform. Its secrets are write-only and never shown.',
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Deployment', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    platform: t.expose('platform', { type: DeploymentPlatformEnum }),
    config: t.expose('config', { type: 'JSON' }),
    valid: t.exposeBoolean('valid'),
    agent: t.relation('agent'),
    owner: t.relation('user'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.queryField('deployments', (t) =>
  t.prismaField({
    type: ['Deployment'],
    description: 'Deployments of all the agents you own, newest first.',
    // The client omits `secrets` from every read; Pothos's model type still lists the column.
    resolve: async (query, _root, _args, ctx) => (await ctx.services.deployments.listMine(viewerOf(ctx), query)) as DeploymentRow[],
  }),
);
