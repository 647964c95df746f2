import { z } from 'zod';
import { conceptPatchSchema, type ConceptWithImages } from '../domain/concepts/index.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { fieldNames } from './field-names.ts';
import { operation } from './operation.ts';

const names = fieldNames({ usageInstructions: 'usage_instructions' });
const errors: RestErrorStyle = { bodyKey: 'message', fieldName: names.toRest };

export const restConceptSchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    name: z.string(),
    agent: z.string().nullable().meta({ description: 'The id of the agent it belongs to' }),
    user: z.string().meta({ description: "The owner's id" }),
    usage_instructions: z.string(),
    images: z.array(z.object({ image: z.string(), usage_instructions: z.string() })),
    public: z.boolean(),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'Concept' });

export const toRestConcept = (c: ConceptWithImages): z.input<typeof restConceptSchema> => ({
  _id: c.id,
  id: c.id,
  name: c.name,
  agent: c.agentId,
  user: c.userId,
  usage_instructions: c.usageInstructions,
  images: c.images.map((i) => ({ image: i.image, usage_instructions: i.usageInstructions })),
  public: c.public,
  createdAt: c.createdAt,
  updatedAt: c.updatedAt,
});

export const conceptOperations = [
  operation({
    operationId: 'getConcept',
    method: 'get',
    path: '/v2/concepts/:conceptId',
    tag: 'Concepts V2',
    summary: 'A concept of yours, or a public one',
    ok: { json: z.object({ concept: restConceptSchema }) },
    errors: { style: errors, codes: ['FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      concept: toRestConcept(await services.concepts.get(request.viewer, request.params.conceptId)),
    }),
  }),
  operation({
    operationId: 'updateConcept',
    method: 'patch',
    path: '/v2/concepts/:conceptId',
    tag: 'Concepts V2',
    summary: 'Update a concept you own',
    body: names.schema(conceptPatchSchema),
    ok: { json: z.object({ concept: restConceptSchema }) },
    errors: { style: errors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => ({
      concept: toRestConcept(
        await services.concepts.update(request.viewer, request.params.conceptId, names.toDomain(request.body, ['images'])),
      ),
    }),
  }),
];
