import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isDomainError, type DomainError } from '../domain/core/errors.ts';
import type { Services } from '../domain/services.ts';
import type { Viewer } from '../domain/core/viewer.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set for every route not marked `public`, and for GraphQL when the key sent is valid. */
    viewer: Viewer;
  }
}

/** Decides whether a request, its caller now known, may go on; false when it has been answered. */
export type Admission = (request: FastifyRequest, reply: FastifyReply) => Promise<boolean>;

/** A request refused before its body is read closes its connection rather than wait for the body to drain. */
export function closeIfBodyUnread(request: FastifyRequest, reply: FastifyReply) {
  if (request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0)
    reply.header('connection', 'close');
}

/** The key a request carries: `X-Api-Key`, or `Authorization: Bearer` where the route takes it (MCP). */
function keyOf(request: FastifyRequest): string | undefined {
  const key = request.headers['x-api-key'] as string | undefined;
  if (key !== undefined || !request.routeOptions.config.bearer) return key;
  return /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1];
}

/**
 * Every REST route needs `X-Api-Key` unless its config says `public`; failures are 401 `{error}`.
 * GraphQL's route is public (some fields are) but takes a key when one is sent. `admit` runs
 * once the caller is known and before a 401, so requests without a valid key are counted too.
 */
export function installAuth(app: FastifyInstance, services: Services, admit: Admission = async () => true) {
  app.decorateRequest('viewer', null as unknown as Viewer);
  app.addHook('onRequest', async (request, reply) => {
    const route = request.routeOptions;
    const required = Boolean(route.url) && !route.config.public;
    let refusal: DomainError | null = null;
    if (required || (route.config.graphql && request.headers['x-api-key'] !== undefined)) {
      try {
        request.viewer = await services.apiKeys.authenticate(keyOf(request));
      } catch (e) {
        // GraphQL looks the key up again and answers a failure (the database is down) its own way.
        if (!isDomainError(e) && required) throw e;
        if (isDomainError(e)) refusal = e;
      }
    }
    if (!(await admit(request, reply))) return reply;
    if (!required || !refusal) return;
    closeIfBodyUnread(request, reply);
    return reply.code(401).send({ error: refusal.message });
  });
}
