import type { FastifyInstance } from 'fastify';
import type { Database } from '../db/database.ts';
import { RETRY_AFTER_SECONDS } from '../domain/core/stores/prisma-errors.ts';
import type { Services } from '../domain/services.ts';

/** A health check answers within this even when the database does not. */
const HEALTH_TIMEOUT_MS = 2_000;

/** `GET /healthz`: 200 with what the service runs on, or 503 naming what is out of reach. */
export function healthRoute(http: FastifyInstance, database: Database, services: Services) {
  http.get('/healthz', { config: { public: true } }, async (_request, reply) => {
    const unavailable = (body: object) =>
      reply
        .code(503)
        .header('retry-after', String(RETRY_AFTER_SECONDS))
        .send({ status: 'unavailable', ...body });
    if (!(await database.ping(HEALTH_TIMEOUT_MS))) return unavailable({ database: 'unreachable' });
    const events = await services.bus.describe();
    if (!events.reachable) return unavailable({ database: 'ok', events: 'unreachable' });
    return {
      status: 'ok',
      database: 'ok',
      events: events.events,
      replies: services.provider.description,
      search: await services.search.describe(),
    };
  });
}
