import { randomUUID } from 'node:crypto';
import type { Config } from '../config.ts';
import { onCommitted } from '../db/after-commit.ts';
import type { Db } from '../db/database.ts';
import type { Metrics } from '../observability/metrics.ts';
import { isDatabaseUnavailable } from './core/stores/prisma-errors.ts';
import { agentService, agentStore } from './agents/index.ts';
import { apiKeyService, prismaApiKeyStore } from './api-keys/index.ts';
import { collectionService, collectionStore } from './collections/index.ts';
import { conceptService, conceptStore } from './concepts/index.ts';
import { creationService, creationStore } from './creations/index.ts';
import { creatorService, creatorStore } from './creators/index.ts';
import { deploymentAnnouncer } from './deployments/announce.ts';
import { type Answers, type Connector, noSealer, type SecretSealer } from './deployments/ports.ts';
import { type Conversations, relayRules } from './deployments/relay.ts';
import type { ChatSettle } from './deployments/chat-approvals.ts';
import { reportedDeployments } from './deployments/reported.ts';
import { deploymentRuntime } from './deployments/runtime.ts';
import { deploymentRuntimeStore } from './deployments/runtime-store.ts';
import { deploymentService, deploymentStore } from './deployments/index.ts';
import { retryDelay, sleep } from './deployments/waits.ts';
import { feedService } from './feeds/index.ts';
import { modelService, modelStore } from './models/index.ts';
import { type ChosenProvider, createReplyEngine, promptOutcomeStore, promptOutcomes, replyStore, withOneRetry } from './replies/index.ts';
import type { EventBus } from './core/bus.ts';
import type { JobQueue } from './core/jobs.ts';
import { autonomyRules, prismaAutonomyStore } from './autonomy/index.ts';
import { approvalRules } from './approvals/index.ts';
import { PromptSavedAlready, prismaSessionStore, sessionService, sessionTitles } from './sessions/index.ts';
import type { StreamLimits } from './core/stream-limits.ts';
import { accessGate, prismaWatchAccessStore } from './access/index.ts';
import { prismaSignalStore, signalOutbox } from './signals/index.ts';
import { shareService, prismaShareStore } from './shares/index.ts';
import { mannaService, prismaMannaStore } from './manna/index.ts';
import { type MediaLinks, mediaLinks } from './core/media-links.ts';
import { type MediaStore, mediaStore } from './media/index.ts';
import { memoryService, memoryStore } from './memories/index.ts';
import type { EmbeddingProvider } from './search/embeddings/provider.ts';
import { searchService, searchStore } from './search/index.ts';
import type { ToolServiceClient } from './tools/executors/types.ts';
import { createToolHost, type ToolRegistry, toolExecutors, toolRunQueue, toolStore } from './tools/index.ts';
import type { TriggerEvents } from './triggers/ports.ts';
import { triggerJobs, workTriggers } from './triggers/queue.ts';
import { triggerRunner } from './triggers/runner.ts';
import type { TaskEvents } from './tasks/events.ts';
import { taskRunner } from './tasks/runner.ts';
import { approvalStatements, taskService, recordToolCalls, taskStore } from './tasks/index.ts';
import { claimTask } from './tasks/settle-store.ts';
import { triggerService, triggerStore } from './triggers/index.ts';
import type { AddressGuard } from './core/outbound.ts';
import {
  mcpAgentTools,
  type McpClients,
  mcpEndpoint,
  McpServerFailed,
  mcpServerSealedRows,
  mcpServerService,
  prismaMcpServerStore,
} from './mcp-servers/index.ts';
import {
  DELIVERIES_DUE,
  prismaDeliveryStore,
  prismaWebhookStore,
  webhookDeliveries,
  type WebhookPayloads,
  webhookSealedRows,
  type WebhookSender,
  webhookService,
} from './webhooks/index.ts';

/**
 * What the domain is given by a composition root (`app.ts`, the CLI's `cli/services.ts`): the
 * adapters it runs on are chosen there, never here.
 */
export interface ServiceDependencies {
  config: Pick<
    Config,
    | 'llm'
    | 'events'
    | 'search'
    | 'mediaDir'
    | 'publicUrl'
    | 'host'
    | 'port'
    | 'maxAgentsPerUser'
    | 'limits'
    | 'work'
    | 'collections'
    | 'deployments'
    | 'triggers'
    | 'jobs'
    | 'webhooks'
    | 'mcp'
  >;
  /** Live events: in process, or shared by every instance through Redis. */
  bus: EventBus;
  /** Subscriptions and streams per key, counted where the bus's deployment counts them. */
  streamLimits: StreamLimits;
  log: { error(obj: unknown, msg?: string): void; warn?(obj: unknown, msg?: string): void; info?(obj: unknown, msg?: string): void };
  /** Where services count what they do. */
  metrics: Metrics;
  /** Where clients reach the service (for links to media), once it is known. */
  publicUrl?: () => string;
  /** Names this process on the replies it writes and the deployments' leases it holds; a new one by default. */
  instanceId?: string;
  /** The platforms agents can be deployed to, and the sealer of their secrets; none by default. */
  deployments?: { sealer: SecretSealer; connectors: readonly Connector[] };
  /** Background work that must happen later, once, on any instance (`core/jobs.ts`). */
  jobs: JobQueue;
  /** The model that writes replies, titles and memories: an OpenAI-compatible endpoint, or the offline responder. */
  chat: ChosenProvider;
  /** Turns creations and queries into vectors for search: an embedding server, or the built-in hashed n-grams. */
  embeddings: EmbeddingProvider;
  /** Calls the tools served elsewhere (a tool whose handler is a URL). */
  toolServices: ToolServiceClient;
  /** The guard of users' URLs and the caller of webhooks' receivers; none by default (webhooks refused). */
  webhooks?: { guard: AddressGuard; sender: WebhookSender };
  /** The client of users' MCP servers; none by default (their tools cannot be listed or called). */
  mcp?: McpClients;
}

/** For compositions that reach no MCP server (a CLI command's). */
const noMcpClients: McpClients = {
  tools: async () => {
    throw new McpServerFailed('MCP servers are not reached by this process');
  },
  call: async () => {
    throw new McpServerFailed('MCP servers are not reached by this process');
  },
  check: () => 'MCP servers are not reached by this process',
  forget: () => {},
};

/** For compositions that call no receiver (a CLI command's): a URL is refused, saying why. */
const noWebhooks = (): NonNullable<ServiceDependencies['webhooks']> => {
  const why = 'webhooks are not served by this process';
  return {
    guard: { refusal: async () => why },
    sender: { post: async () => ({ error: why, durationMs: 0 }) },
  };
};

/** Endpoints' rules, and their deliveries on the job queue (worked once the service listens). */
function composeWebhooks(db: Db, dependencies: ServiceDependencies, log: Log) {
  const { guard, sender } = dependencies.webhooks ?? noWebhooks();
  const sealer = dependencies.deployments?.sealer ?? noSealer('no webhooks are signed in this process');
  const settings = dependencies.config.webhooks;
  let stopSweeping = () => {};
  return {
    service: webhookService({ store: prismaWebhookStore(db), sealer, guard, limits: { perUser: settings.perUser } }),
    /**
     * Declares the deliveries' queue and works it on this instance, rendering events' objects with
     * `payloads` (REST's, handed in by the composition root: it is built from these services).
     */
    async start(payloads: WebhookPayloads) {
      const deliveries = webhookDeliveries({
        store: prismaDeliveryStore(db),
        sender,
        sealer,
        payloads,
        jobs: dependencies.jobs,
        feeds: dependencies.bus.feeds,
        settings,
        log,
      });
      stopSweeping = await deliveries.start((handOver) => onCommitted(db, DELIVERIES_DUE, handOver));
    },
    stop: () => stopSweeping(),
  };
}

/** MCP servers users register: checked by the guard webhooks' URLs are, sealed with the deployments' key. */
function composeMcpServers(db: Db, dependencies: ServiceDependencies, parts: { media: MediaStore; log: Log }) {
  const store = prismaMcpServerStore(db);
  const sealer = dependencies.deployments?.sealer ?? noSealer('no MCP server authorization is sealed in this process');
  const clients = dependencies.mcp ?? noMcpClients;
  return {
    service: mcpServerService({
      store,
      sealer,
      guard: (dependencies.webhooks ?? noWebhooks()).guard,
      clients,
      limits: { perUser: dependencies.config.mcp.serversPerUser },
    }),
    /** Their tools as agents' replies offer and run them. */
    agentTools: mcpAgentTools({
      store,
      endpointOf: mcpEndpoint(store, sealer),
      clients,
      media: parts.media,
      log: parts.log,
      offerWaitMs: dependencies.config.mcp.offerWaitMs,
    }),
  };
}

type Log = ServiceDependencies['log'];

/**
 * The services' log, where a failure because the database is out of reach is a warning, as the
 * transports' 503s are: each background loop (trigger sweeps, leases, recoveries) tries again
 * on its next pass, so an outage is weather to watch, not a fault in the code.
 */
function outageAware(log: Log): Log {
  const unreachable = (obj: unknown) => isDatabaseUnavailable((obj as { err?: unknown } | null)?.err);
  return {
    error: (obj, msg) => (unreachable(obj) && log.warn ? log.warn(obj, msg) : log.error(obj, msg)),
    warn: log.warn && ((obj, msg) => log.warn?.(obj, msg)),
    info: log.info && ((obj, msg) => log.info?.(obj, msg)),
  };
}

/**
 * Tools at work: search and media they make, the queue of runs, who runs each tool, and the
 * host replies run them through (its calls' rows written by the tasks' statements).
 */
function composeTools(db: Db, registry: ToolRegistry, dependencies: ServiceDependencies, log: Log) {
  const { config, bus, metrics } = dependencies;
  const search = searchService(searchStore(db), config.search, dependencies.embeddings);
  const media = mediaStore(config.mediaDir);
  const links = mediaLinks(dependencies.publicUrl ?? (() => config.publicUrl ?? `http://${config.host}:${config.port}`));
  const queue = toolRunQueue({ perUser: config.work.toolRunsPerUser, total: config.work.toolRunsPerProcess });
  const executors = toolExecutors(registry, { search, media, imageWorkers: config.work.imageWorkers, remote: dependencies.toolServices });
  const taskApprovals = approvalStatements(db);
  const mcpServers = composeMcpServers(db, dependencies, { media, log });
  const tools = createToolHost({
    store: toolStore(
      db,
      { deploymentDailyCap: config.deployments.dailyMannaCap },
      { record: recordToolCalls(db), claim: claimTask, approvals: taskApprovals },
    ),
    registry,
    executors,
    search,
    bus,
    log,
    metrics: metrics.manna,
    work: config.work,
    queue,
    links,
    mcp: mcpServers.agentTools,
  });
  return { search, media, links, queue, executors, tools, taskApprovals, mcpServers };
}

/** Every domain service, built once per app; REST handlers and GraphQL resolvers both use these. */
export function createServices(db: Db, registry: ToolRegistry, dependencies: ServiceDependencies) {
  const { config, bus, metrics } = dependencies;
  const log = outageAware(dependencies.log);
  const instanceId = dependencies.instanceId ?? randomUUID();
  const warnings = { warn: (obj: unknown, msg?: string) => (log.warn ? log.warn(obj, msg) : log.error(obj, msg)) };
  const { offline } = dependencies.chat;
  // A model call that failed before anything streamed is tried once more, and every failure counted;
  // the offline responder reaches nothing, so it has no such failures.
  const provider = offline ? dependencies.chat.provider : withOneRetry(dependencies.chat.provider, metrics.replies.providerError);
  const { search, media, links, queue, executors, tools, taskApprovals, mcpServers } = composeTools(db, registry, dependencies, log);
  const approvals = approvalRules({
    store: taskApprovals,
    permissionIn: (viewer, sessionId) => sessions.permissionIn(viewer, sessionId),
    bus,
    jobs: dependencies.jobs,
    log,
  });
  const memories = memoryService(memoryStore(db), provider, { offline, model: config.llm.models.default }, log);
  const replies = createReplyEngine({
    store: replyStore(db, sessionTitles(db)),
    bus,
    provider,
    offline,
    llm: config.llm,
    tools,
    memory: memories.host,
    instanceId,
    log,
    metrics: metrics.replies,
    approvals: approvals.timers,
  });
  // A task's changes go to its owner's feed (docs/feeds.md), once stored: a bus out of reach loses
  // the announcement (a watcher reads the task again), never the change or a settlement.
  const taskEvents: TaskEvents = {
    publish: (userId, event) =>
      bus.feeds.publish(userId, event).catch((err) => warnings.warn({ err, task: event.taskId }, 'could not publish a task event')),
  };
  const tasksStore = taskStore(db);
  const tasks = taskService({
    store: tasksStore,
    registry,
    runnable: new Set(executors.keys()),
    runner: taskRunner({ store: tasksStore, registry, executors, queue, search, events: taskEvents, log }),
    events: taskEvents,
    instanceId,
    unsettledPerUser: config.work.tasksPerUser,
    listPageMaxBytes: config.work.listPageMaxBytes,
    log,
  });
  const signals = signalOutbox(prismaSignalStore(db), bus, warnings);
  const access = accessGate(prismaWatchAccessStore(db), config.events.accessRecheckMs, warnings);
  // How a prompt's replies end, for those who wait on them (a deployment's chat, a trigger's run).
  const outcomes = promptOutcomes({ bus, store: promptOutcomeStore(db) });
  const autonomy = autonomyRules({ store: prismaAutonomyStore(db), bus, jobs: dependencies.jobs, replies, log });
  const sessions = sessionService(prismaSessionStore(db), bus, replies, config.work, dependencies.streamLimits, {
    gate: access,
    signals,
    autonomy,
  });
  const deployments = composeDeployments(db, dependencies, {
    bus,
    sessions,
    answers: outcomes,
    approvals: { settle: (ownerId, sessionId, callId, approve) => approvals.settle({ id: ownerId }, sessionId, callId, { approve }) },
    instanceId,
    links,
    log: { warn: warnings.warn, error: (obj, msg) => log.error(obj, msg), info: (obj, msg) => log.info?.(obj, msg) },
  });
  // Told after the change is stored; a feed that cannot be reached loses the news, not the run.
  const triggerEvents: TriggerEvents = {
    publish: (userId, event) =>
      bus.feeds
        .publish(userId, event)
        .catch((error: unknown) => warnings.warn({ err: error, event: event.type }, 'a trigger event was not published')),
  };
  const triggersRun = triggerRunner({
    store: triggerStore(db),
    jobs: triggerJobs(dependencies.jobs),
    events: triggerEvents,
    send: (viewer, input) => sessions.send(viewer, input),
    awaitOutcome: outcomes.awaitOutcome,
    outcome: outcomes.outcome,
    cancel: (sessionId, promptId) => bus.cancelReplies({ sessionId, promptId, reason: 'cancelled' }),
    runTimeoutMs: config.triggers.runTimeoutS * 1000,
    lateGraceMs: config.triggers.lateGraceS * 1000,
    promptLeaseMs: config.jobs.takeoverS * 1000,
    log,
  });
  const webhooks = composeWebhooks(db, dependencies, log);
  let stopSweeping = () => {};
  return {
    db,
    jobs: dependencies.jobs,
    /** Declares the job queues and works them here, once the service listens; webhooks' events show their objects as REST does. */
    async startWork(parts: { webhookPayloads: WebhookPayloads }) {
      const [, , stop] = await Promise.all([
        autonomy.startWork(),
        webhooks.start(parts.webhookPayloads),
        workTriggers(dependencies.jobs, triggersRun, log),
        approvals.startWork(replies),
      ]);
      stopSweeping = stop;
    },
    /** Stops what `startWork` started beside the queue's workers (the triggers' sweep, the replies runs follow). */
    stopWork() {
      stopSweeping();
      webhooks.stop();
      triggersRun.close();
    },
    metrics,
    tools: registry,
    media,
    /** Media links made absolute where clients reach the service now: every transport shows them so. */
    links,
    bus,
    provider,
    replies,
    apiKeys: apiKeyService(prismaApiKeyStore(db), signals),
    creators: creatorService(creatorStore(db)),
    agents: agentService(agentStore(db), registry, config),
    concepts: conceptService(conceptStore(db)),
    models: modelService(modelStore(db), config.work),
    creations: creationService(creationStore(db)),
    collections: collectionService(collectionStore(db), config.collections),
    search,
    deployments: deployments.service,
    deploymentRuntime: deployments.runtime,
    triggers: triggerService(triggerStore(db), triggersRun, triggerEvents, config.triggers),
    /** Users' own feeds (triggers, tasks, deployments): features publish on `bus.feeds` and watch through this. */
    feeds: feedService({ bus, limits: dependencies.streamLimits, gate: access }),
    sessions,
    /** Tool calls that wait for their payer's yes: `settle` is the one front every surface answers them through. */
    approvals: { settle: approvals.settle },
    signals,
    access,
    shares: shareService(prismaShareStore(db), sessions),
    memories,
    manna: mannaService(prismaMannaStore(db)),
    tasks,
    webhooks: webhooks.service,
    mcpServers: mcpServers.service,
  };
}

export type Services = ReturnType<typeof createServices>;

/**
 * Deployments: their rules, and the runtime that runs them on the instance holding each one's
 * lease (started by the app only). Sessions are what a chat becomes; the deployments' rules
 * reach them through `Conversations`.
 */
function composeDeployments(
  db: Db,
  dependencies: ServiceDependencies,
  parts: {
    bus: EventBus;
    sessions: ReturnType<typeof sessionService>;
    answers: Answers;
    approvals: ChatSettle;
    instanceId: string;
    links: MediaLinks;
    log: { error(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void; info(obj: unknown, msg?: string): void };
  },
) {
  const { sealer, connectors } = dependencies.deployments ?? { sealer: noSealer('no deployments run in this process'), connectors: [] };
  const conversations: Conversations = {
    open: async (ownerId, agentId, title) => (await parts.sessions.send({ id: ownerId }, { agentIds: [agentId], title })).sessionId,
    post: (ownerId, sessionId, content, { whileReplying, ...relay }) =>
      parts.sessions.send({ id: ownerId }, { sessionId, content, whileReplying }, { relay }).then(
        (started) => ({ after: started.startSeq }),
        (e: unknown) => {
          if (e instanceof PromptSavedAlready) return { conflict: 'saved-already' as const };
          throw e;
        },
      ),
  };
  const store = deploymentRuntimeStore(db);
  const rows = deploymentStore(db);
  const reported = reportedDeployments(rows, sealer);
  const announce = deploymentAnnouncer(parts.bus, parts.log);
  const runtime = deploymentRuntime({
    store,
    relay: relayRules({
      store,
      conversations,
      answers: parts.answers,
      defaults: dependencies.config.deployments,
      links: parts.links,
      approvals: parts.approvals,
    }),
    connectors,
    sealer,
    instanceId: parts.instanceId,
    leaseMs: dependencies.config.deployments.leaseMs,
    log: parts.log,
    pause: (attempt, signal) => sleep(retryDelay(attempt), signal),
    async changed(id) {
      const row = await rows.byId(id);
      // The owner's feed shows it as it is, as REST and GraphQL do (the service's rows are so already).
      if (row) await announce((await reported([row]))[0]!);
    },
  });
  const service = deploymentService({
    store: rows,
    sealer,
    connectors,
    alsoSealed: [webhookSealedRows(db), mcpServerSealedRows(db)],
    changed: (row, deleted) => {
      runtime.nudge();
      void announce(row, deleted);
    },
  });
  return { service, runtime };
}
