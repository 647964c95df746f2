import { defaultSearchConfig, type SearchConfig } from '../config.ts';
import type { Db } from '../db/database.ts';
import { agentService } from './agents/service.ts';
import { apiKeyService } from './api-keys/service.ts';
import { conceptService } from './concepts/service.ts';
import { creationService } from './creations/service.ts';
import { creatorService } from './creators/service.ts';
import { deploymentService } from './deployments/service.ts';
import { modelService } from './models/service.ts';
import { searchService } from './search/service.ts';
import type { ToolRegistry } from './tools/registry.ts';
import { triggerService } from './triggers/service.ts';

/** Every domain service, built once per app; REST handlers and GraphQL resolvers both use these. */
export function createServices(db: Db, tools: ToolRegistry, search: SearchConfig = defaultSearchConfig) {
  return {
    db,
    tools,
    apiKeys: apiKeyService(db),
    creators: creatorService(db),
    agents: agentService(db, tools),
    concepts: conceptService(db),
    models: modelService(db),
    creations: creationService(db),
    search: searchService(db, search),
    deployments: deploymentService(db),
    triggers: triggerService(db),
  };
}

export type Services = ReturnType<typeof createServices>;
