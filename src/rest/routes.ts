import type { FastifyInstance } from 'fastify';
import type { EventsConfig } from '../config.ts';
import type { Services } from '../domain/services.ts';
import { agentOperations } from './agents.ts';
import { apiKeyOperations } from './api-keys.ts';
import { collectionOperations } from './collections.ts';
import { conceptOperations } from './concepts.ts';
import { creationOperations } from './creations.ts';
import { creatorOperations } from './creators.ts';
import { deploymentOperations } from './deployments.ts';
import { mcpServerOperations } from './mcp-servers.ts';
import { memoryOperations } from './memories.ts';
import { modelOperations } from './models.ts';
import { openApiOperation } from './openapi.ts';
import { serve, type RestContext, type RestOperation } from './operation.ts';
import { senderDirectory } from './senders.ts';
import { sessionUserOperations } from './session-users.ts';
import { sessionOperations } from './sessions.ts';
import { shareOperations } from './shares.ts';
import { taskOperations } from './tasks.ts';
import { threadOperations } from './threads.ts';
import { toolOperations } from './tools.ts';
import { triggerOperations } from './triggers.ts';
import { webhookOperations } from './webhooks.ts';

const resources: readonly RestOperation[] = [
  ...apiKeyOperations,
  ...agentOperations,
  ...deploymentOperations,
  ...triggerOperations,
  ...memoryOperations,
  ...conceptOperations,
  ...modelOperations,
  ...toolOperations,
  ...creationOperations,
  ...creatorOperations,
  ...sessionOperations,
  ...shareOperations,
  ...sessionUserOperations,
  ...taskOperations,
  ...collectionOperations,
  ...threadOperations,
  ...webhookOperations,
  ...mcpServerOperations,
];

/** Every REST operation under `/v2` and `/apikeys`: the routes and the OpenAPI document both come from this list. */
export const restOperations: readonly RestOperation[] = [...resources, openApiOperation(resources)];

/** What every REST handler is given besides its request. */
export const restContext = (services: Services, events: EventsConfig): RestContext => ({
  services,
  stream: { events, streams: services.metrics.streams, senders: senderDirectory(services.creators), links: services.links },
});

export function restRoutes(app: FastifyInstance, services: Services, events: EventsConfig) {
  const context = restContext(services, events);
  for (const op of restOperations) serve(app, op, context);
}
