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

const UpdateModelInput = builder.inputType('UpdateModelInput', {
  fields: (t) => ({ name: t.string(), public: t.boolean() }),
});

builder.mutationField('updateModel', (t) =>
  t.prismaField({
    type: 'Model',
    description: 'Renames a model of yours, or makes it public or private.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateModelInput, required: true }) },
    resolve: (query, _root, { id, input }, ctx) =>
      ctx.services.models.update(viewerOf(ctx), String(id), Object.fromEntries(Object.entries(input).filter(([, v]) => v != null)), query),
  }),
);

builder.queryField('model', (t) =>
  t.prismaField({
    type: 'Model',
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, { id }, ctx) => ctx.services.models.get(viewerOf(ctx), String(id), query),
  }),
);
