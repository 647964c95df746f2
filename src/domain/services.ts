import { randomUUID } from 'node:crypto';
import { loadConfig, type Config } from '../config.ts';
import { createMetrics, type Metrics } from '../observability/metrics.ts';
import type { Db } from '../db/database.ts';
import type { EventBus } from '../realtime/bus.ts';
import { memorySlotStore } from '../limits/slots.ts';
import { streamLimits, type StreamLimits } from '../limits/streams.ts';
import { createMemoryBus } from '../realtime/memory-bus.ts';
import { agentService } from './agents/service.ts';
import { apiKeyService } from './api-keys/service.ts';
import { conceptService } from './concepts/service.ts';
import { creationService } from './creations/service.ts';
import { creatorService } from './creators/service.ts';
import { deploymentService } from './deployments/service.ts';
import { modelService } from './models/service.ts';
import { createReplyEngine } from './replies/engine.ts';
import { chooseProvider } from './replies/provider.ts';
import { sessionService } from './sessions/service.ts';
import { shareService } from './shares/service.ts';
import { mannaService } from './manna/service.ts';
import { mediaStore } from './media/store.ts';
import { memoryService } from './memory/service.ts';
import { searchService } from './search/service.ts';
import { createToolHost } from './tools/host.ts';
import type { ToolRegistry } from './tools/registry.ts';
import { triggerService } from './triggers/service.ts';

export interface ServiceOptions {
  config?: Pick<Config, 'llm' | 'events' | 'search' | 'mediaDir' | 'publicUrl' | 'host' | 'port' | 'maxAgentsPerUser' | 'limits' | 'work'>;
  /** Where clients reach the service (for links to media), once it is known. */
  publicUrl?: () => string;
  bus?: EventBus;
  /** Subscriptions and streams per key; counted in this process unless given (shared through Redis). */
  streamLimits?: StreamLimits;
  log?: { error(obj: unknown, msg?: string): void };
  /** Names this process on the replies it writes; a new one by default. */
  instanceId?: string;
  /** Where services count what they do; by default a registry nobody reads (CLI, tests of one service). */
  metrics?: Metrics;
}

/** Every domain service, built once per app; REST handlers and GraphQL resolvers both use these. */
export function createServices(db: Db, registry: ToolRegistry, options: ServiceOptions = {}) {
  const config = options.config ?? loadConfig({});
  const bus = options.bus ?? createMemoryBus(config.events);
  const log = options.log ?? { error: (obj: unknown, msg?: string) => console.error(msg, obj) };
  const metrics = options.metrics ?? createMetrics();
  const { provider, offline } = chooseProvider(config.llm, metrics.replies.providerError);
  const search = searchService(db, config.search);
  const media = mediaStore(config.mediaDir, options.publicUrl ?? (() => config.publicUrl ?? `http://${config.host}:${config.port}`));
  const tools = createToolHost({ db, registry, bus, search, media, log, metrics: metrics.manna, work: config.work });
  const memories = memoryService(db, provider, { offline, model: config.llm.models.default }, log);
  const replies = createReplyEngine({
    db,
    bus,
    provider,
    offline,
    llm: config.llm,
    tools,
    memory: memories.host,
    instanceId: options.instanceId ?? randomUUID(),
    log,
    metrics: metrics.replies,
  });
  const sessions = sessionService(
    db,
    bus,
    replies,
    config.work,
    options.streamLimits ?? streamLimits(memorySlotStore(), config.limits, { warn: (obj, msg) => log.error(obj, msg) }),
  );
  return {
    db,
    metrics,
    tools: registry,
    media,
    bus,
    provider,
    replies,
    apiKeys: apiKeyService(db, (keyId) => bus.revokeKey(keyId)),
    creators: creatorService(db),
    agents: agentService(db, registry, config),
    concepts: conceptService(db),
    models: modelService(db),
    creations: creationService(db),
    search,
    deployments: deploymentService(db),
    triggers: triggerService(db),
    sessions,
    shares: shareService(db, sessions),
    memories,
    manna: mannaService(db),
  };
}

export type Services = ReturnType<typeof createServices>;
