import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import Fastify, { type FastifyInstance, type RouteOptions } from 'fastify';
import type { Config } from './config.ts';
import { openDatabase, type Database } from './db/database.ts';
import { applyMigrations } from './db/migrate.ts';
import { isDomainError } from './domain/errors.ts';
import { RETRY_AFTER_SECONDS } from './domain/prisma-errors.ts';
import { recoverAbandonedReplies, watchForDeadInstances, type RecoveredReply } from './domain/replies/recovery.ts';
import { createServices, type Services } from './domain/services.ts';
import { loadToolRegistry } from './domain/tools/registry.ts';
import fastifyStatic from '@fastify/static';
import { GRAPHIQL_CSP, graphiqlAssets } from './graphql/graphiql.ts';
import { memoryApqStore, redisApqStore } from './graphql/apq.ts';
import { bodylessRefusal, createGraphQLServer, keyInConnectionParams } from './graphql/server.ts';
import { requestLimits, trackConnections } from './http/connections.ts';
import { connectionCap, openFileLimit } from './http/open-file-limit.ts';
import { rateLimitRequests } from './http/rate-limit.ts';
import { installCors, installSecurityHeaders } from './http/security-headers.ts';
import { createLimits } from './limits/index.ts';
import { throttledWarnings } from './limits/throttled-log.ts';
import { instanceRegistry } from './realtime/instances.ts';
import { createMemoryBus } from './realtime/memory-bus.ts';
import { createRedisBus } from './realtime/redis-bus.ts';
import { connectRedis } from './redis/client.ts';
import { installObservability, requestId, requestLogFields } from './observability/http.ts';
import { createMetrics } from './observability/metrics.ts';
import { attachGraphQLWebSocket } from './realtime/websocket.ts';
import { installAuth } from './rest/auth.ts';
import { frameworkErrorHandler, installErrorHandlers, installJsonParser } from './rest/errors.ts';
import { mediaRoutes } from './rest/media.ts';
import { restRoutes } from './rest/routes.ts';

export const BODY_LIMIT = 1024 * 1024;
/** A health check answers within this even when the database does not. */
const HEALTH_TIMEOUT_MS = 2_000;

export interface App {
  http: FastifyInstance;
  services: Services;
  database: Database;
  websocket: ReturnType<typeof attachGraphQLWebSocket>;
  /** Stops accepting, lets in-flight requests finish, then closes sockets and the database. */
  close(): Promise<void>;
}

/** Where the server listens, as a base URL (for links to what it serves). */
function listeningAt(server: Server): string {
  const address = server.address();
  if (!address || typeof address === 'string') return 'http://127.0.0.1';
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${address.port}`;
}

export interface BuildOptions {
  onQuery?: (sql: string) => void;
  /** Sees every route as it is added (tests fuzz them all). */
  onRoute?: (route: RouteOptions) => void;
}

/** Builds the whole service from config; production and tests use this same factory. */
export async function buildApp(config: Config, options: BuildOptions = {}): Promise<App> {
  // The registry is checked first: a broken tool file should stop start-up before anything opens.
  const tools = await loadToolRegistry(config.toolsDir);
  const database = await openDatabase(config.database, { onQuery: options.onQuery });
  let recovered: RecoveredReply[];
  try {
    await database.exclusively(() => applyMigrations(database.migrationAdapterFactory));
    // Without a shared Redis this is the only instance: a reply still `streaming` now was left
    // by an earlier process that died. With several, the instances close those of one that died.
    recovered = config.redisUrl ? [] : await recoverAbandonedReplies(database.prisma);
  } catch (e) {
    await database.close();
    throw e;
  }
  const { trustProxy } = config.http;
  const metrics = createMetrics({ process: true });
  const http = Fastify({
    logger: config.logLevel === 'silent' ? false : { level: config.logLevel, serializers: { req: requestLogFields } },
    genReqId: requestId,
    bodyLimit: BODY_LIMIT,
    return503OnClosing: true,
    frameworkErrors: frameworkErrorHandler,
    http: requestLimits(config.http),
    // Fastify sets these two on the server itself, after creating it.
    requestTimeout: config.http.requestTimeoutMs,
    keepAliveTimeout: config.http.keepAliveTimeoutMs,
    // A number of hops; Fastify's types take only a function for that.
    trustProxy: typeof trustProxy === 'number' ? (_address: string, hop: number) => hop < trustProxy : trustProxy,
  });
  if (options.onRoute) http.addHook('onRoute', options.onRoute);
  // Counts and persisted queries every instance shares, when there are several.
  const shared = config.redisUrl ? connectRedis(config.redisUrl, 'limits', config.redisKeyPrefix, http.log) : undefined;
  const limits = createLimits(config.limits, shared, http.log);
  const instanceId = randomUUID();
  const bus = config.redisUrl
    ? createRedisBus(config.redisUrl, config.events, config.redisKeyPrefix, http.log)
    : createMemoryBus(config.events);
  const services = createServices(database.prisma, tools, {
    config,
    bus,
    instanceId,
    log: http.log,
    publicUrl: () => config.publicUrl ?? listeningAt(http.server),
    streamLimits: limits.streams,
    metrics,
  });
  if (recovered.length)
    http.log.warn(
      { replies: recovered.map((r) => r.message.id) },
      `${recovered.length} replies left unfinished by a stopped process were saved as failed`,
    );
  const instances = config.redisUrl
    ? instanceRegistry(config.redisUrl, instanceId, config.instanceHeartbeatMs, config.redisKeyPrefix, http.log)
    : null;
  const stopWatchingInstances = instances
    ? watchForDeadInstances(database.prisma, {
        self: instanceId,
        gone: instances.gone,
        bus,
        everyMs: config.instanceHeartbeatMs,
        log: http.log,
      })
    : () => {};
  installJsonParser(http);
  installErrorHandlers(http);
  await installCors(http, config.http);
  await installSecurityHeaders(http);
  installObservability(http, metrics, config.metricsToken);
  installAuth(http, services, rateLimitRequests(limits.rate));

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

  // reply.sendFile for the files the service serves (GraphiQL's assets); routes decide the roots.
  await http.register(fastifyStatic, { serve: false });
  graphiqlAssets(http);
  const yoga = createGraphQLServer(services, http.log, {
    persistedQueries: shared ? redisApqStore(shared, config.apq, throttledWarnings(http.log)) : memoryApqStore(config.apq),
    inFlightPerKey: config.work.graphqlInFlightPerKey,
  });
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

  restRoutes(http, services, config.events);
  mediaRoutes(http, config.mediaDir);

  // On close, replies being written get a grace period to finish (their watchers see them end),
  // then every open stream is told the server is going away, so clients reconnect elsewhere.
  // Connections then close as soon as they have nothing left to answer (responses sent meanwhile
  // say so), rather than holding the process open until their keep-alive timeout.
  const connections = trackConnections(http.server, {
    maxConnections: config.http.maxConnections ?? connectionCap(openFileLimit()),
    log: http.log,
  });
  http.addHook('preClose', async () => {
    await services.replies.drain(config.shutdownGraceMs);
    stopWatchingInstances();
    await instances?.close();
    await services.bus.close();
    await websocket.close();
    connections.closeIdle();
  });
  http.addHook('onSend', async (_request, reply) => {
    if (connections.closing) reply.header('connection', 'close');
  });

  const websocket = attachGraphQLWebSocket(http.server, yoga, yoga.graphqlEndpoint, {
    bus: services.bus,
    events: config.events,
    limits: config.websocket,
    rateLimiter: limits.rate,
    log: http.log,
    authenticate: async (params) => {
      const key = keyInConnectionParams(params);
      try {
        return { viewer: await services.apiKeys.authenticate(key) };
      } catch (e) {
        if (!isDomainError(e)) throw e;
        return { missing: !key, reason: key ? 'Invalid API key' : 'Missing API key: send it in connectionParams as X-Api-Key' };
      }
    },
  });
  metrics.watch({ eventSubscribers: () => services.bus.subscriberCount(), graphqlSockets: () => websocket.stats().open });
  http.addHook('onClose', async () => {
    await limits.close();
    await shared?.quit();
    await database.close();
  });

  return { http, services, database, websocket, close: () => http.close() };
}
