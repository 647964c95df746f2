import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { DeploymentPlatform } from '../generated/prisma/enums.ts';
import type { Deployment } from '../generated/prisma/client.ts';
import type { Services } from '../domain/services.ts';

/** Built field by field: `secrets` is never part of a response. */
export const restDeploymentSchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    agent: z.string(),
    user: z.string(),
    platform: z.enum(DeploymentPlatform),
    config: z.unknown(),
    valid: z.boolean(),
    createdAt: z.date(),
  })
  .meta({ id: 'Deployment' });

export const toRestDeployment = (d: Omit<Deployment, 'secrets'>): z.input<typeof restDeploymentSchema> => ({
  _id: d.id,
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
