import type { FastifyInstance } from 'fastify';
import type { EventsConfig } from '../config.ts';
import type { Services } from '../domain/services.ts';
import { agentRoutes } from './agents.ts';
import { apiKeyRoutes } from './api-keys.ts';
import { conceptRoutes } from './concepts.ts';
import { creationRoutes } from './creations.ts';
import { creatorRoutes } from './creators.ts';
import { deploymentRoutes } from './deployments.ts';
import { memoryRoutes } from './memories.ts';
import { modelRoutes } from './models.ts';
import { openApiRoute } from './openapi.ts';
import { sessionRoutes } from './sessions.ts';
import { toolRoutes } from './tools.ts';
import { triggerRoutes } from './triggers.ts';

export function restRoutes(app: FastifyInstance, services: Services, events: EventsConfig) {
  for (const register of [
    apiKeyRoutes,
    agentRoutes,
    deploymentRoutes,
    triggerRoutes,
    conceptRoutes,
    modelRoutes,
    toolRoutes,
    creationRoutes,
    creatorRoutes,
    memoryRoutes,
  ]) {
    register(app, services);
  }
  sessionRoutes(app, services, events);
  openApiRoute(app);
}
