import { randomUUID } from 'node:crypto';
import { addressGuard, guardedFetch } from './outbound/address-guard.ts';
import { mcpClients } from './outbound/mcp-clients.ts';
import { webhookSender } from './outbound/webhook-sender.ts';
import type { Server } from 'node:http';
import fastifyStatic from '@fastify/static';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type RouteOptions } from 'fastify';
import type { Redis } from 'ioredis';
import type { Config } from './config.ts';
import { connectorsFor } from './connectors/index.ts';
import { openDatabase, type Database } from './db/database.ts';
import { applyMigrations } from './db/migrate.ts';
import { httpExecutor } from './executors/http.ts';
import { recoverAbandonedReplies, recoveryStore, watchForDeadInstances, type RecoveredReply } from './domain/replies/index.ts';
import { deploymentStore } from './domain/deployments/index.ts';
import { createServices, type Services } from './domain/services.ts';
import { loadToolRegistry } from './domain/tools/index.ts';
import { listenForCommands } from './control/socket.ts';
import { memoryApqStore, redisApqStore } from './graphql/apq.ts';
import { graphiqlAssets } from './graphql/graphiql.ts';
import { inFlightCounter } from './graphql/in-flight.ts';
import { createGraphQLServer, graphqlRoute, socketAuthenticator } from './graphql/server.ts';
import { attachGraphQLWebSocket } from './graphql/websocket.ts';
import { installAuth } from './http/auth.ts';
import { requestLimits, trackConnections } from './http/connections.ts';
import { frameworkErrorHandler, installErrorHandlers, installJsonParser } from './http/errors.ts';
import { healthRoute } from './http/health.ts';
import { listen } from './http/listen.ts';
import { connectionCap, openFileLimit } from './http/open-file-limit.ts';
import { playgroundRoutes } from './http/playground.ts';
import { rateLimitRequests } from './http/rate-limit.ts';
import { installCors, installSecurityHeaders } from './http/security-headers.ts';
import { createLimits } from './limits/index.ts';
import { throttledWarnings } from './limits/throttled-log.ts';
import { pgBossQueue, type RunningJobQueue } from './jobs/pg-boss.ts';
import { installObservability, requestId, requestLogFields } from './observability/http.ts';
import { createMetrics, type Metrics } from './observability/metrics.ts';
import { chatProviderFor, embeddingProviderFor } from './providers/index.ts';
import { createEventBus } from './realtime/index.ts';
import { instanceRegistry } from './realtime/instances.ts';
import { connectRedis } from './redis/client.ts';
import { mcpRoute } from './mcp/route.ts';
import { mediaRoutes } from './rest/media.ts';
import { restRoutes } from './rest/routes.ts';
import { restWebhookPayloads } from './rest/webhook-payloads.ts';
import { loadSealer } from './secrets/keyring.ts';

export const BODY_LIMIT = 1024 * 1024;
/** How often signals the bus could not take at once (revocations) are tried again. */
const SIGNAL_RETRY_MS = 1_000;
/** How often every instance looks for signals left by one that died before delivering them. */
const SIGNAL_SWEEP_MS = 30_000;

export interface App {
  http: FastifyInstance;
  services: Services;
  database: Database;
  websocket: ReturnType<typeof attachGraphQLWebSocket>;
  /** Starts listening (with several handles on its socket: `http/listen.ts`); the address. */
  listen(options: { port: number; host: string }): Promise<string>;
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
  // The registry is checked first: a broken tool file, or a tool service at an address the
  // outbound rules refuse, should stop start-up before anything opens.
  const tools = await loadToolRegistry(config.toolsDir, addressGuard(config.outbound));
  const { database, recovered } = await openMigratedDatabase(config, options);
  const http = createHttpServer(config, options);
  const metrics = createMetrics({ process: true });
  const adapters = connectAdapters(config, http.log);
  // What the database holds sealed decides whether a key may be made: never a new one beside secrets sealed with another.
  const sealer = await loadSealer(config.secrets, http.log, await deploymentStore(database.prisma).sealedKeys());
  const jobs = pgBossQueue(database.jobs, config.jobs, http.log);
  const mcp = mcpClients(config.outbound, {
    timeoutMs: config.mcp.timeoutMs,
    toolsTtlMs: config.mcp.toolsTtlS * 1000,
    maxAnswerBytes: config.mcp.maxAnswerBytes,
    idleMs: config.mcp.clientIdleS * 1000,
  });
  const services = createServices(database.prisma, tools, {
    jobs,
    config,
    bus: adapters.bus,
    streamLimits: adapters.limits.streams,
    instanceId: adapters.instanceId,
    log: http.log,
    publicUrl: () => config.publicUrl ?? listeningAt(http.server),
    metrics,
    deployments: { sealer, connectors: connectorsFor(config) },
    chat: chatProviderFor(config.llm),
    embeddings: embeddingProviderFor(config.search.embeddings),
    toolServices: httpExecutor(guardedFetch(config.outbound)),
    webhooks: { guard: addressGuard(config.outbound), sender: webhookSender(config.outbound) },
    mcp,
  });
  reportRecovered(http.log, recovered);
  // As with replies: alone, every task left unsettled was left by an earlier process that died.
  if (!config.redisUrl) reportSettledTasks(http.log, await services.tasks.recoverAbandoned());
  const stopWatchingInstances = watchInstances(database, adapters, config, http.log);
  const stopWatchingRunners = adapters.instances
    ? services.tasks.watchForDeadRunners({ gone: adapters.instances.gone, everyMs: config.instanceHeartbeatMs, log: http.log })
    : () => {};
  // Signals the bus could not take when they were made (Redis out of reach) go out once it is back;
  // those an earlier process left, now.
  await services.signals.flush();
  const stopFlushingSignals = services.signals.start(SIGNAL_RETRY_MS, SIGNAL_SWEEP_MS);

  await installHttpPlumbing(http, config, metrics);
  installAuth(http, services, rateLimitRequests(adapters.limits.rate));
  healthRoute(http, database, services);
  // reply.sendFile for the files the service serves (GraphiQL's assets); routes decide the roots.
  await http.register(fastifyStatic, { serve: false });
  graphiqlAssets(http);
  playgroundRoutes(http);
  const inFlight = inFlightCounter(config.work.graphqlInFlightPerKey);
  const yoga = createGraphQLServer(services, http.log, {
    persistedQueries: apqStore(config, adapters.shared, http.log),
    inFlight,
  });
  graphqlRoute(http, yoga);
  restRoutes(http, services, config.events);
  mediaRoutes(http, config.mediaDir);
  mcpRoute(http, services, config.mcp);
  const websocket = attachGraphQLWebSocket(http.server, yoga, yoga.graphqlEndpoint, {
    bus: services.bus,
    events: config.events,
    limits: config.websocket,
    rateLimiter: adapters.limits.rate,
    log: http.log,
    authenticate: socketAuthenticator(services.apiKeys),
    inFlight,
  });
  // The embedded database is this process's alone: the CLI's writing commands come through it.
  const commands =
    config.database.kind === 'pglite' && config.database.dataDir
      ? // A command run here did not make the data directory, whatever this start did.
        await listenForCommands(config.database.dataDir, { services, database: { ...database, fromSnapshot: false } }, http.log)
      : null;
  metrics.watch({ eventSubscribers: () => services.bus.subscriberCount(), graphqlSockets: () => websocket.stats().open });
  // After recovery closed what an earlier process left: a deployment answers what it read then.
  services.deploymentRuntime.start();
  closeInOrder(http, config, {
    services,
    jobs,
    websocket,
    commands,
    database,
    adapters,
    stop: [stopWatchingInstances, stopWatchingRunners, stopFlushingSignals, () => void mcp.close()],
  });

  return {
    http,
    services,
    database,
    websocket,
    async listen(options) {
      const address = await listen(http, options);
      // After listening, not before: the queue's start is none of /healthz's business.
      void jobs
        .start()
        .then(() => services.startWork({ webhookPayloads: restWebhookPayloads(services) }))
        .catch((err) => http.log.error({ err }, 'the job queue could not start'));
      return address;
    },
    close: () => http.close(),
  };
}

/** Opens the database and migrates it; without a shared Redis, closes replies a dead process left. */
async function openMigratedDatabase(config: Config, options: BuildOptions) {
  const database = await openDatabase(config.database, { onQuery: options.onQuery });
  try {
    await database.exclusively(() => applyMigrations(database.migrationAdapterFactory));
    // Without a shared Redis this is the only instance: a reply still `streaming` now was left
    // by an earlier process that died. With several, the instances close those of one that died.
    const recovered: RecoveredReply[] = config.redisUrl ? [] : await recoverAbandonedReplies(recoveryStore(database.prisma));
    return { database, recovered };
  } catch (e) {
    await database.close();
    throw e;
  }
}

function createHttpServer(config: Config, options: BuildOptions) {
  const { trustProxy } = config.http;
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
  return http;
}

type Adapters = ReturnType<typeof connectAdapters>;

/** The adapters the deployment asks for: in process for one instance, through Redis for several. */
function connectAdapters(config: Config, log: FastifyBaseLogger) {
  // Counts and persisted queries every instance shares, when there are several. Requests wait on
  // them, so while Redis is out of reach they give up after a second (limits then let requests
  // through) instead of waiting out reconnect after reconnect.
  const shared = config.redisUrl ? connectRedis(config.redisUrl, 'limits', config.redisKeyPrefix, log, 1_000) : undefined;
  const instanceId = randomUUID();
  return {
    shared,
    instanceId,
    limits: createLimits(config.limits, shared, log),
    bus: createEventBus(config, log),
    instances: config.redisUrl
      ? instanceRegistry(config.redisUrl, instanceId, config.instanceHeartbeatMs, config.redisKeyPrefix, log)
      : null,
  };
}

function reportRecovered(log: FastifyBaseLogger, recovered: RecoveredReply[]) {
  if (!recovered.length) return;
  log.warn(
    { replies: recovered.map((r) => r.message.id) },
    `${recovered.length} replies left unfinished by a stopped process were saved as failed`,
  );
}

function reportSettledTasks(log: FastifyBaseLogger, settled: { id: string }[]) {
  if (!settled.length) return;
  log.warn({ tasks: settled.map((t) => t.id) }, `${settled.length} tasks left unfinished by a stopped process were settled as failed`);
}

/** With several instances, each closes the replies of one that stopped beating. */
function watchInstances(database: Database, adapters: Adapters, config: Config, log: FastifyBaseLogger) {
  if (!adapters.instances) return () => {};
  return watchForDeadInstances(recoveryStore(database.prisma), {
    self: adapters.instanceId,
    gone: adapters.instances.gone,
    bus: adapters.bus,
    everyMs: config.instanceHeartbeatMs,
    log,
  });
}

/** What every route goes through: body parsing, error bodies, CORS, security headers, metrics and request logs. */
async function installHttpPlumbing(http: FastifyInstance, config: Config, metrics: Metrics) {
  installJsonParser(http);
  installErrorHandlers(http);
  await installCors(http, config.http);
  await installSecurityHeaders(http);
  installObservability(http, metrics, config.metricsToken);
}

function apqStore(config: Config, shared: Redis | undefined, log: FastifyBaseLogger) {
  return shared ? redisApqStore(shared, config.apq, throttledWarnings(log)) : memoryApqStore(config.apq);
}

/**
 * On close, replies being written get a grace period to finish (their watchers see them end),
 * then every open stream is told the server is going away, so clients reconnect elsewhere.
 * Connections then close as soon as they have nothing left to answer (responses sent meanwhile
 * say so), rather than holding the process open until their keep-alive timeout.
 */
function closeInOrder(
  http: FastifyInstance,
  config: Config,
  parts: {
    services: Services;
    jobs: RunningJobQueue;
    websocket: ReturnType<typeof attachGraphQLWebSocket>;
    commands: { close(): Promise<void> } | null;
    database: Database;
    adapters: Adapters;
    /** Timers of this instance's own, stopped before anything closes. */
    stop: (() => void)[];
  },
) {
  const { services, websocket, database, adapters } = parts;
  const connections = trackConnections(http.server, {
    maxConnections: config.http.maxConnections ?? connectionCap(openFileLimit()),
    log: http.log,
  });
  http.addHook('preClose', async () => {
    // Deployments read nothing more; what they answer now gets the replies' grace, then their leases go to another instance.
    await services.deploymentRuntime.quiesce();
    // Jobs under way here (an autonomous turn writing its reply) get the same grace as replies;
    // past it they are failed, and another instance tries them again. Tasks past it are failed
    // with their holds returned.
    services.stopWork();
    await Promise.all([
      services.replies.drain(config.shutdownGraceMs),
      parts.jobs.stop(config.shutdownGraceMs),
      services.tasks.drain(config.shutdownGraceMs),
    ]);
    await services.deploymentRuntime.stop();
    for (const stop of parts.stop) stop();
    services.access.stop();
    await adapters.instances?.close();
    await services.bus.close();
    await websocket.close();
    await parts.commands?.close();
    connections.closeIdle();
  });
  http.addHook('onSend', async (_request, reply) => {
    if (connections.closing) reply.header('connection', 'close');
  });
  http.addHook('onClose', async () => {
    await adapters.limits.close();
    await adapters.shared?.quit();
    await database.close();
  });
}
