import type { FastifyInstance } from 'fastify';
import type { Services } from '../domain/services.ts';
import type { RestErrorStyle } from '../http/errors.ts';

/** Another user's or an unknown key is a 401 "API key not found", as in the original. */
const errors: RestErrorStyle = { bodyKey: 'message', status: { NOT_FOUND: 401 } };
/** For the OpenAPI description. */
export { errors as apiKeyErrors };

export function apiKeyRoutes(app: FastifyInstance, services: Services) {
  app.delete<{ Body: { apiKey?: unknown } | undefined }>('/apikeys', { config: { errors } }, async (request) => {
    const body = request.body;
    await services.apiKeys.delete(request.viewer, typeof body === 'object' && body !== null ? body.apiKey : undefined);
    return {};
  });
}
