import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isDomainError } from '../domain/errors.ts';
import type { Services } from '../domain/services.ts';
import type { Viewer } from '../domain/viewer.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set for every route not marked `public`. */
    viewer: Viewer;
  }
}

const hasBody = (headers: FastifyRequest['headers']) => headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;

/** Every REST route needs `X-Api-Key` unless its config says `public`; failures are 401 `{error}`. */
export function installAuth(app: FastifyInstance, services: Services) {
  app.decorateRequest('viewer', null as unknown as Viewer);
  app.addHook('onRequest', async (request, reply) => {
    if (request.routeOptions.config.public || !request.routeOptions.url) return;
    try {
      request.viewer = await services.apiKeys.authenticate(request.headers['x-api-key'] as string | undefined);
    } catch (e) {
      if (!isDomainError(e)) throw e;
      // The body is never read: close rather than wait for the rest of it to drain.
      if (hasBody(request.headers)) reply.header('connection', 'close');
      return reply.code(401).send({ error: e.message });
    }
  });
}
