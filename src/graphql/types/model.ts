import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

export const Model = builder.prismaObject('Model', {
  interfaces: nodeInterfaces,
  description: 'A trained LoRA.',
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Model', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    name: t.exposeString('name'),
    baseModel: t.exposeString('baseModel'),
    checkpoint: t.exposeString('checkpoint', { nullable: true }),
    thumbnail: t.exposeString('thumbnail', { nullable: true }),
    loraTriggerText: t.exposeString('loraTriggerText', { nullable: true }),
    public: t.exposeBoolean('public'),
    args: t.expose('args', { type: 'JSON' }),
    owner: t.relation('user'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.queryField('model', (t) =>
  t.prismaField({
    type: 'Model',
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, { id }, ctx) => ctx.services.models.get(viewerOf(ctx), String(id), query),
  }),
);
