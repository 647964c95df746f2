import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import type { IncomingMessage } from 'node:http';
import { createYoga, type Plugin } from 'graphql-yoga';
import type { Services } from '../domain/services.ts';
import type { Viewer } from '../domain/viewer.ts';
import { createContext } from './context.ts';
import { createErrorMasker } from './errors.ts';
import { renderGraphiQL } from './graphiql.ts';
import { graphqlMetrics } from './metrics.ts';
import { hideSuggestions } from './suggestions.ts';
import { schema } from './schema.ts';

export interface GraphQLLogger {
  error(obj: unknown, msg?: string): void;
}

/** An HTTP request carries its API key; a WebSocket's caller was established when it connected. */
interface ServerContext {
  request?: Request;
  req?: IncomingMessage;
  viewer?: Viewer;
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
 * buffers responses unless told otherwise (REST streams say the same: src/realtime/sse.ts).
 */
const unbufferedEventStreams = (): Plugin => ({
  onResponse({ response }) {
    if (response.headers.get('content-type')?.startsWith('text/event-stream')) response.headers.set('x-accel-buffering', 'no');
  },
});

export function createGraphQLServer(services: Services, logger: GraphQLLogger) {
  return createYoga<ServerContext>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    // The app's one CORS policy answers for /graphql too (src/http/security-headers.ts).
    cors: false,
    graphiql: { title: 'parley', headers: JSON.stringify({ 'X-Api-Key': '<your API key>' }), subscriptionsProtocol: 'SSE' },
    renderGraphiQL,
    logging: false,
    context: (initial) => (initial.viewer ? { services, auth: { viewer: initial.viewer } } : createContext(services, apiKeyFrom(initial))),
    maskedErrors: { maskError: createErrorMasker((err) => logger.error({ err }, 'unexpected error in a GraphQL operation')) },
    plugins: [
      EnvelopArmorPlugin({
        maxDepth: { n: 12 },
        maxAliases: { n: 30 },
        costLimit: { maxCost: 20000 },
        maxTokens: { n: 5000 },
        // Ours also hides the enum form, and in variable values too.
        blockFieldSuggestion: { enabled: false },
      }),
      hideSuggestions(),
      graphqlMetrics(services.metrics.graphql),
      unbufferedEventStreams(),
    ],
  });
}

export type GraphQLServer = ReturnType<typeof createGraphQLServer>;
