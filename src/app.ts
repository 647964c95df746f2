import Fastify, { type FastifyInstance } from 'fastify';
import type { Config } from './config.ts';
import { openDatabase, type Database } from './db/database.ts';
import { applyMigrations } from './db/migrate.ts';
import { createServices, type Services } from './domain/services.ts';
import { loadToolRegistry } from './domain/tools/registry.ts';
import { createGraphQLServer } from './graphql/server.ts';
import { attachGraphQLWebSocket } from './realtime/websocket.ts';
import { installAuth } from './rest/auth.ts';
import { frameworkErrorHandler, installErrorHandlers, installJsonParser } from './rest/errors.ts';
import { restRoutes } from './rest/routes.ts';

export const BODY_LIMIT = 1024 * 1024;

export interface App {
  http: FastifyInstance;
  services: Services;
  database: Database;
  /** Stops accepting, lets in-flight requests finish, then closes sockets and the database. */
  close(): Promise<void>;
}

export interface BuildOptions {
  onQuery?: (sql: string) => void;
}

/** Builds the whole service from config; production and tests use this same factory. */
export async function buildApp(config: Config, options: BuildOptions = {}): Promise<App> {
  // The registry is checked first: a broken tool file should stop start-up before anything opens.
  const tools = await loadToolRegistry(config.toolsDir);
  const database = await openDatabase(config.database, { onQuery: options.onQuery });
  try {
    await applyMigrations(database.migrationAdapterFactory);
  } catch (e) {
    await database.close();
    throw e;
  }
  const services = createServices(database.prisma, tools, config.search);

  const http = Fastify({
    logger: config.logLevel === 'silent' ? false : { level: config.logLevel },
    bodyLimit: BODY_LIMIT,
    return503OnClosing: true,
    frameworkErrors: frameworkErrorHandler,
  });
  installJsonParser(http);
  installErrorHandlers(http);
  installAuth(http, services);

  http.get('/healthz', { config: { public: true } }, async (_request, reply) => {
    try {
      await database.prisma.$queryRaw`SELECT 1`;
      return { status: 'ok', database: 'ok', search: await services.search.describe() };
    } catch {
      return reply.code(503).send({ status: 'unavailable', database: 'unreachable' });
    }
  });

  const yoga = createGraphQLServer(services, http.log);
  http.route({
    url: yoga.graphqlEndpoint,
    method: ['GET', 'POST', 'OPTIONS'],
    config: { public: true },
    handler: async (request, reply) => {
      const response = await yoga.handleNodeRequestAndResponse(request, reply, { req: request.raw });
      response.headers.forEach((value, key) => reply.header(key, value));
      reply.status(response.status);
      return reply.send(response.body);
    },
  });

  restRoutes(http, services);

  // Responses finished while closing end their connection: a keep-alive socket left idle after
  // close() began would otherwise hold the process open until its keep-alive timeout.
  let closing = false;
  http.addHook('preClose', async () => {
    closing = true;
  });
  http.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });

  const websocket = attachGraphQLWebSocket(http.server, yoga, yoga.graphqlEndpoint);
  http.addHook('onClose', async () => {
    await websocket.close();
    await database.close();
  });

  return { http, services, database, close: () => http.close() };
}
