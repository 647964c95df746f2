import type { FastifyInstance } from 'fastify';
import type { Deployment } from '../generated/prisma/client.ts';
import type { Services } from '../domain/services.ts';

/** Built field by field: `secrets` is never part of a response. */
export const toRestDeployment = (d: Omit<Deployment, 'secrets'>) => ({
  id: d.id,
  agent: d.agentId,
  user: d.userId,
  platform: d.platform,
  config: d.config,
  valid: d.valid,
  createdAt: d.createdAt,
});

export function deploymentRoutes(app: FastifyInstance, services: Services) {
  app.get('/v2/agents/deployments', async (request) => ({
    deployments: (await services.deployments.listMine(request.viewer)).map(toRestDeployment),
  }));
}
