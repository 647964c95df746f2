import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';
import { TriggerStatusEnum } from './enums.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

export const Trigger = builder.prismaObject('Trigger', {
  interfaces: nodeInterfaces,
  description: 'A scheduled prompt an agent runs on a cron schedule.',
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Trigger', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    name: t.exposeString('name'),
    cron: t.exposeString('cron'),
    timezone: t.exposeString('timezone'),
    triggerPrompt: t.exposeString('triggerPrompt'),
    status: t.expose('status', { type: TriggerStatusEnum }),
    lastRun: t.expose('lastRun', { type: 'DateTime', nullable: true }),
    nextRun: t.expose('nextRun', { type: 'DateTime', nullable: true }),
    agent: t.relation('agent'),
    owner: t.relation('user'),
    session: t.relation('session', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.queryField('triggers', (t) =>
  t.prismaField({
    type: ['Trigger'],
    description: 'Triggers of all the agents you own, newest first.',
    resolve: (query, _root, _args, ctx) => ctx.services.triggers.listMine(viewerOf(ctx), query),
  }),
);
