import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { APQStore } from '@graphql-yoga/plugin-apq';
import { type InFlightCounter, inFlightPerKey } from './in-flight.ts';
import type { FastifyInstance } from 'fastify';
import { createYoga, type Plugin } from 'graphql-yoga';
import { isDomainError } from '../domain/core/errors.ts';
import type { Services } from '../domain/services.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import { persistedQueries } from './apq.ts';
import { documentLimits } from './armor.ts';
import { createContext } from './context.ts';
import { createErrorMasker } from './errors.ts';
import { GRAPHIQL_CSP, GRAPHIQL_DOCUMENT, renderGraphiQL } from './graphiql.ts';
import { graphqlMetrics } from './metrics.ts';
import { hideSuggestions } from './suggestions.ts';
import { schema } from './schema.ts';

export interface GraphQLLogger {
  error(obj: unknown, msg?: string): void;
  warn(obj: unknown, msg?: string): void;
}

/** An HTTP request carries its API key; a WebSocket's caller was established when it connected. */
interface ServerContext {
  request?: Request;
  req?: IncomingMessage;
  viewer?: Viewer;
  /** Set by the graphql-ws server, which counts its operations in flight itself. */
  countedBySocket?: boolean;
}

/** graphql-ws clients send the key in `connectionParams`, under any of these names. */
export const keyInConnectionParams = (params: Record<string, unknown> | undefined): string | null => {
  const key = params?.['X-Api-Key'] ?? params?.['x-api-key'] ?? params?.apiKey;
  return typeof key === 'string' ? key : null;
};

const apiKeyFrom = (c: ServerContext): string | null => {
  const header = c.request?.headers.get('x-api-key') ?? c.req?.headers['x-api-key'];
  return typeof header === 'string' ? header : null;
};

/**
 * Subscriptions over SSE must reach clients as they are written, also behind nginx, which
 * buffers responses unless told otherwise (REST streams say the same: src/http/sse.ts).
 */
const unbufferedEventStreams = (): Plugin => ({
  onResponse({ response }) {
    if (response.headers.get('content-type')?.startsWith('text/event-stream')) response.headers.set('x-accel-buffering', 'no');
  },
});

export interface GraphQLServerOptions {
  /** Where automatic persisted queries are kept (in this process, or Redis for every instance). */
  persistedQueries: APQStore;
  /** Queries and mutations each API key has under way (shared with the graphql-ws server). */
  inFlight: InFlightCounter;
}

export function createGraphQLServer(services: Services, logger: GraphQLLogger, options: GraphQLServerOptions) {
  return createYoga<ServerContext>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    // The app's one CORS policy answers for /graphql too (src/http/security-headers.ts).
    cors: false,
    graphiql: {
      title: 'parley',
      headers: JSON.stringify({ 'X-Api-Key': '<your API key>' }),
      subscriptionsProtocol: 'SSE',
      defaultQuery: GRAPHIQL_DOCUMENT,
    },
    renderGraphiQL,
    logging: false,
    context: (initial) =>
      initial.viewer
        ? { services, auth: { viewer: initial.viewer }, countedBySocket: initial.countedBySocket }
        : createContext(services, apiKeyFrom(initial)),
    maskedErrors: {
      maskError: createErrorMasker(
        (err) => logger.error({ err }, 'unexpected error in a GraphQL operation'),
        (err) => logger.warn({ err }, 'the database is unavailable'),
      ),
    },
    plugins: [
      persistedQueries(options.persistedQueries),
      ...documentLimits(),
      hideSuggestions(),
      graphqlMetrics(services.metrics.graphql),
      inFlightPerKey(options.inFlight),
      unbufferedEventStreams(),
    ],
  });
}

export type GraphQLServer = ReturnType<typeof createGraphQLServer>;

/**
 * Yoga refuses a few requests with a status and no body at all: a POST whose content type it
 * cannot read (none, say), or an Accept header that allows no answer. Thrown from the route, the
 * app's error handler answers them in the transport error shape, saying what to send instead.
 */
export function bodylessRefusal(status: number): Error {
  const message =
    status === 415
      ? 'Send GraphQL requests as application/json (POST), or in the query string (GET)'
      : status === 406
        ? 'Accept application/json or application/graphql-response+json (text/event-stream for subscriptions)'
        : (STATUS_CODES[status] ?? 'Bad Request');
  return Object.assign(new Error(message), { statusCode: status });
}

/** Serves GraphQL over HTTP (and GraphiQL to browsers) at the Yoga endpoint, under GraphiQL's CSP. */
export function graphqlRoute(http: FastifyInstance, yoga: GraphQLServer) {
  http.route({
    url: yoga.graphqlEndpoint,
    method: ['GET', 'POST', 'OPTIONS'],
    config: { public: true, graphql: true },
    helmet: { contentSecurityPolicy: { useDefaults: false, directives: GRAPHIQL_CSP } },
    handler: async (request, reply) => {
      const response = await yoga.handleNodeRequestAndResponse(request, reply, { req: request.raw, viewer: request.viewer ?? undefined });
      if (response.body === null && response.status >= 400) throw bodylessRefusal(response.status);
      response.headers.forEach((value, key) => reply.header(key, value));
      reply.status(response.status);
      return reply.send(response.body);
    },
  });
}

/** How a graphql-ws socket's `connection_init` is judged: the key in its params, as over HTTP. */
export function socketAuthenticator(apiKeys: Services['apiKeys']) {
  return async (params: Record<string, unknown> | undefined) => {
    const key = keyInConnectionParams(params);
    try {
      return { viewer: await apiKeys.authenticate(key) };
    } catch (e) {
      if (!isDomainError(e)) throw e;
      return { missing: !key, reason: key ? 'Invalid API key' : 'Missing API key: send it in connectionParams as X-Api-Key' };
    }
  };
}
