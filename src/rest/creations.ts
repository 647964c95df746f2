import type { FastifyInstance } from 'fastify';
import type { Services } from '../domain/services.ts';
import type { RestErrorStyle } from './errors.ts';

const errors: RestErrorStyle = { bodyKey: 'message' };

export function creationRoutes(app: FastifyInstance, services: Services) {
  app.post<{ Params: { creationId: string } }>('/v2/creations/:creationId/like', { config: { errors } }, async (request) => {
    await services.creations.like(request.viewer, request.params.creationId);
    return { message: 'Creation liked successfully' };
  });

  app.delete<{ Params: { creationId: string } }>('/v2/creations/:creationId/like', { config: { errors } }, async (request) => {
    await services.creations.unlike(request.viewer, request.params.creationId);
    return { message: 'Creation unliked successfully' };
  });
}
