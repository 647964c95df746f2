import type { FastifyInstance } from 'fastify';
import type { ConceptWithImages } from '../domain/concepts/service.ts';
import type { Services } from '../domain/services.ts';
import type { RestErrorStyle } from './errors.ts';
import { fieldNames } from './field-names.ts';

const names = fieldNames({ usageInstructions: 'usage_instructions' });
const errors: RestErrorStyle = { bodyKey: 'message', fieldName: names.toRest };

export const toRestConcept = (c: ConceptWithImages) => ({
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
    concept: toRestConcept(await services.concepts.update(request.viewer, request.params.conceptId, names.toDomain(request.body, ['images']))),
  }));
}
