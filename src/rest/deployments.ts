import { z } from 'zod';
import type { Deployment } from '../generated/prisma/client.ts';
import { DeploymentPlatform } from '../generated/prisma/enums.ts';
import { operation } from './operation.ts';

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

export const deploymentOperations = [
  operation({
    operationId: 'listDeployments',
    method: 'get',
    path: '/v2/agents/deployments',
    tag: 'Agents - Deployments',
    summary: 'Deployments of the agents you own, newest first',
    ok: { json: z.object({ deployments: z.array(restDeploymentSchema) }) },
    handler: async (request, _reply, { services }) => ({
      deployments: (await services.deployments.listMine(request.viewer)).map(toRestDeployment),
    }),
  }),
];
