import type { FastifyInstance } from 'fastify';
import type { ToolDefinition } from '../domain/tools/definition.ts';
import type { Services } from '../domain/services.ts';

export const toRestTool = (t: ToolDefinition) => ({
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
