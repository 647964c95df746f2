import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ConceptWithImages } from '../domain/concepts/service.ts';
import type { Services } from '../domain/services.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { fieldNames } from './field-names.ts';

const names = fieldNames({ usageInstructions: 'usage_instructions' });
const errors: RestErrorStyle = { bodyKey: 'message', fieldName: names.toRest };
/** For the OpenAPI description. */
export { errors as conceptErrors, names as conceptNames };

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

export function conceptRoutes(app: FastifyInstance, services: Services) {
  app.get<{ Params: { conceptId: string } }>('/v2/concepts/:conceptId', { config: { errors } }, async (request) => ({
    concept: toRestConcept(await services.concepts.get(request.viewer, request.params.conceptId)),
  }));

  app.patch<{ Params: { conceptId: string } }>('/v2/concepts/:conceptId', { config: { errors } }, async (request) => ({
    concept: toRestConcept(
      await services.concepts.update(request.viewer, request.params.conceptId, names.toDomain(request.body, ['images'])),
    ),
  }));
}
