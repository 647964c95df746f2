import { builder } from '../builder.ts';
import { loadersOf, viewerOf } from '../context.ts';
import { Agent, readableAgent } from './agent.ts';
import { Tool } from './tool.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

export const Creation = builder.prismaObject('Creation', {
  interfaces: nodeInterfaces,
  description: 'An output of a tool: an image, a video, a sound or a text.',
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Creation', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    name: t.exposeString('name'),
    toolKey: t.exposeString('tool'),
    tool: t.field({ type: Tool, nullable: true, resolve: (c, _, ctx) => ctx.services.tools.get(c.tool) ?? null }),
    args: t.expose('args', { type: 'JSON' }),
    // Stored relative to the service: shown absolute, where it is served from now.
    url: t.string({ resolve: (c, _, ctx) => ctx.services.links.absolute(c.url) }),
    thumbnail: t.string({ nullable: true, resolve: (c, _, ctx) => ctx.services.links.absolute(c.thumbnail) }),
    filename: t.exposeString('filename', { nullable: true }),
    mediaAttributes: t.expose('mediaAttributes', { type: 'JSON' }),
    likeCount: t.exposeInt('likeCount'),
    score: t.float({
      nullable: true,
      description: 'Cosine similarity to the search query (the higher, the closer); null outside search results.',
      resolve: (c) => (c as { score?: number }).score ?? null,
    }),
    likedByMe: t.boolean({ resolve: (c, _, ctx) => loadersOf(ctx).likedByViewer.load(c.id) }),
    public: t.exposeBoolean('public'),
    creator: t.relation('user'),
    agent: t.field({
      type: Agent,
      nullable: true,
      select: (_args, _ctx, nested) => ({ agent: nested(true) }),
      resolve: (creation, _args, ctx) => readableAgent(ctx, creation.agent),
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.queryField('creation', (t) =>
  t.prismaField({
    type: 'Creation',
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, { id }, ctx) => ctx.services.creations.get(viewerOf(ctx), String(id), query),
  }),
);

const UpdateCreationInput = builder.inputType('UpdateCreationInput', {
  fields: (t) => ({ name: t.string(), public: t.boolean() }),
});
const given = (input: Record<string, unknown>) => Object.fromEntries(Object.entries(input).filter(([, v]) => v != null));

builder.mutationFields((t) => ({
  updateCreation: t.prismaField({
    type: 'Creation',
    description: 'Renames a creation of yours, or makes it public or private.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateCreationInput, required: true }) },
    resolve: (query, _root, { id, input }, ctx) => ctx.services.creations.update(viewerOf(ctx), String(id), given(input), query),
  }),
  updateCreations: t.prismaField({
    type: ['Creation'],
    description: 'The same change to up to 100 creations of yours, all or none; in the order named.',
    args: { ids: t.arg.idList({ required: true }), input: t.arg({ type: UpdateCreationInput, required: true }) },
    resolve: (query, _root, { ids, input }, ctx) =>
      ctx.services.creations.updateMany(viewerOf(ctx), { ...given(input), creationIds: ids.map(String) }, query),
  }),
  deleteCreations: t.boolean({
    description: 'Deletes up to 100 creations of yours, all or none; they leave every collection.',
    args: { ids: t.arg.idList({ required: true }) },
    resolve: async (_root, { ids }, ctx) => {
      await ctx.services.creations.updateMany(viewerOf(ctx), { creationIds: ids.map(String), deleted: true });
      return true;
    },
  }),
  likeCreation: t.prismaField({
    type: 'Creation',
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, { id }, ctx) => ctx.services.creations.like(viewerOf(ctx), String(id), query),
  }),
  unlikeCreation: t.prismaField({
    type: 'Creation',
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, { id }, ctx) => ctx.services.creations.unlike(viewerOf(ctx), String(id), query),
  }),
}));
