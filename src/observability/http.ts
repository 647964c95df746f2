import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Metrics } from './metrics.ts';

/** Ids a caller (or a proxy in front) may pass in `X-Request-Id`: short, and safe in any log line. */
const CALLER_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The id of a request, in its log lines and its `X-Request-Id` response header: the caller's own
 * when it sent a sane one, so one id follows a request through proxies and services; else a new one.
 */
export function requestId(request: IncomingMessage): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && CALLER_ID.test(given) ? given : randomUUID();
}

/**
 * What a request's log lines say about it. The query string is left out: it carries what users
 * search for, and whatever a misconfigured client puts there (keys included).
 */
export function requestLogFields(request: FastifyRequest) {
  const query = request.url.indexOf('?');
  return {
    method: request.method,
    url: query < 0 ? request.url : `${request.url.slice(0, query)}?…`,
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * Echoes each request's id, counts every response by route pattern (never the raw URL, which
 * holds ids), and serves the metrics at `GET /metrics`: to anyone when `token` is unset, else
 * only with `Authorization: Bearer <token>`. Call before the hooks that may answer early (auth),
 * so their responses are counted and carry the id too.
 */
export function installObservability(app: FastifyInstance, metrics: Metrics, token: string | undefined) {
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    metrics.http.observe(request.routeOptions.url ?? 'unmatched', request.method, reply.statusCode, reply.elapsedTime / 1000);
  });

  const expected = token === undefined ? null : digest(token);
  app.get('/metrics', { config: { public: true } }, async (request, reply) => {
    if (expected) {
      const [scheme, given] = (request.headers.authorization ?? '').split(' ');
      if (scheme?.toLowerCase() !== 'bearer' || !given || !timingSafeEqual(digest(given), expected)) {
        return reply
          .code(401)
          .header('www-authenticate', 'Bearer')
          .send({ error: 'Unauthorized', message: 'Send the metrics token as Authorization: Bearer <METRICS_TOKEN>' });
      }
    }
    return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
}
