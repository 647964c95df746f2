import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Services } from '../domain/services.ts';
import type { RestErrorStyle } from '../http/errors.ts';

const errors: RestErrorStyle = { bodyKey: 'error' };
/** For the OpenAPI description. */
export { errors as memoryErrors };

export const restMemorySchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    fact: z.string(),
    session: z.string().nullable().meta({ description: 'The session it was learnt in' }),
    createdAt: z.date(),
  })
  .meta({ id: 'Memory' });

type Params = { Params: { agentId: string; memoryId?: string } };

/** What an agent remembers about the caller ("Agents - Memory"): read it, forget some or all of it. */
export function memoryRoutes(app: FastifyInstance, services: Services) {
  app.get<Params>('/v2/agents/:agentId/memories', { config: { errors } }, async (request) => ({
    memories: (await services.memories.list(request.viewer, request.params.agentId)).map(
      (m): z.input<typeof restMemorySchema> => ({ _id: m.id, id: m.id, fact: m.fact, session: m.sessionId, createdAt: m.createdAt }),
    ),
  }));

  app.delete<Params>('/v2/agents/:agentId/memories', { config: { errors } }, async (request) => ({
    deleted: await services.memories.forget(request.viewer, request.params.agentId),
  }));

  app.delete<Params>('/v2/agents/:agentId/memories/:memoryId', { config: { errors } }, async (request) => ({
    deleted: await services.memories.forget(request.viewer, request.params.agentId, request.params.memoryId),
  }));
}
