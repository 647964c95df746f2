import { loadConfig, type Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { EventBus } from '../realtime/bus.ts';
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
import { searchService } from './search/service.ts';
import type { ToolRegistry } from './tools/registry.ts';
import { triggerService } from './triggers/service.ts';

export interface ServiceOptions {
  config?: Pick<Config, 'llm' | 'events' | 'search' | 'maxAgentsPerUser'>;
  bus?: EventBus;
  log?: { error(obj: unknown, msg?: string): void };
}

/** Every domain service, built once per app; REST handlers and GraphQL resolvers both use these. */
export function createServices(db: Db, tools: ToolRegistry, options: ServiceOptions = {}) {
  const config = options.config ?? loadConfig({});
  const bus = options.bus ?? createMemoryBus(config.events);
  const log = options.log ?? { error: (obj: unknown, msg?: string) => console.error(msg, obj) };
  const { provider, offline } = chooseProvider(config.llm);
  const replies = createReplyEngine({ db, bus, provider, offline, llm: config.llm, log });
  const sessions = sessionService(db, bus, replies);
  return {
    db,
    tools,
    bus,
    provider,
    replies,
    apiKeys: apiKeyService(db, (keyId) => bus.revokeKey(keyId)),
    creators: creatorService(db),
    agents: agentService(db, tools, config),
    concepts: conceptService(db),
    models: modelService(db),
    creations: creationService(db),
    search: searchService(db, config.search),
    deployments: deploymentService(db),
    triggers: triggerService(db),
    sessions,
    shares: shareService(db, sessions),
  };
}

export type Services = ReturnType<typeof createServices>;
