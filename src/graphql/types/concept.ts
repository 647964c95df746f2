import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';
import { Agent, readableAgent } from './agent.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

builder.prismaObject('ConceptImage', {
  fields: (t) => ({ image: t.exposeString('image'), usageInstructions: t.exposeString('usageInstructions') }),
});

export const Concept = builder.prismaObject('Concept', {
  interfaces: nodeInterfaces,
  description: 'A named set of reference images an agent uses for a consistent look.',
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Concept', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    name: t.exposeString('name'),
    usageInstructions: t.exposeString('usageInstructions'),
    public: t.exposeBoolean('public'),
    images: t.relation('images', { query: { orderBy: { position: 'asc' } } }),
    agent: t.field({
      type: Agent,
      nullable: true,
      select: (_args, _ctx, nested) => ({ agent: nested(true) }),
      resolve: (concept, _args, ctx) => readableAgent(ctx, concept.agent),
    }),
    owner: t.relation('user'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const ConceptImageInput = builder.inputType('ConceptImageInput', {
  fields: (t) => ({ image: t.string({ required: true }), usageInstructions: t.string() }),
});

const conceptInput = (required: boolean) =>
  builder.inputType(required ? 'CreateConceptInput' : 'UpdateConceptInput', {
    fields: (t) => ({
      name: t.string({ required }),
      agent: t.id({ description: 'One of your agents; null detaches the concept.' }),
      usageInstructions: t.string(),
      images: t.field({ type: [ConceptImageInput], required, description: '1 to 25 images; replaces the whole list.' }),
    }),
  });
const CreateConceptInput = conceptInput(true);
const UpdateConceptInput = conceptInput(false);

builder.queryField('concept', (t) =>
  t.prismaField({
    type: 'Concept',
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, { id }, ctx) => ctx.services.concepts.get(viewerOf(ctx), String(id), query),
  }),
);

builder.mutationFields((t) => ({
  createConcept: t.prismaField({
    type: 'Concept',
    args: { input: t.arg({ type: CreateConceptInput, required: true }) },
    resolve: (query, _root, { input }, ctx) => ctx.services.concepts.create(viewerOf(ctx), input, query),
  }),
  updateConcept: t.prismaField({
    type: 'Concept',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateConceptInput, required: true }) },
    resolve: (query, _root, { id, input }, ctx) => ctx.services.concepts.update(viewerOf(ctx), String(id), input, query),
  }),
}));
