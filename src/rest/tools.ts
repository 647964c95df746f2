import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { toolDefinitionSchema, type ToolDefinition } from '../domain/tools/definition.ts';
import type { Services } from '../domain/services.ts';

const definition = toolDefinitionSchema.shape;

/** A registry file's public fields, with the rules the registry checks them by. */
export const restToolSchema = z
  .object({
    key: definition.key,
    name: definition.name,
    output_type: definition.output_type,
    active: z.boolean(),
    description: definition.description,
    cost_estimate: definition.cost_estimate.meta({
      description: 'Arithmetic over the parameters (+ - * /, min, max, ceil, floor): the manna a call costs',
    }),
    parameters: definition.parameters,
    resolutions: z.array(z.string()),
    thumbnail: z.string().nullable(),
    order: definition.order,
    base_model: z.string().nullable(),
  })
  .meta({ id: 'Tool' });

export const toRestTool = (t: ToolDefinition): z.input<typeof restToolSchema> => ({
  key: t.key,
  name: t.name,
  output_type: t.output_type,
  active: t.active,
  description: t.description,
  cost_estimate: t.cost_estimate,
  parameters: t.parameters,
  resolutions: t.resolutions,
  thumbnail: t.thumbnail ?? null,
  order: t.order,
  base_model: t.base_model ?? null,
});

export function toolRoutes(app: FastifyInstance, services: Services) {
  app.get('/v2/tools', async () => ({ tools: services.tools.listAvailable().map(toRestTool) }));
}
