import { z } from 'zod';
import type { RestErrorStyle } from '../http/errors.ts';
import { operation } from './operation.ts';

const errors: RestErrorStyle = { bodyKey: 'error' };

export const restMemorySchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    fact: z.string(),
    session: z.string().nullable().meta({ description: 'The session it was learnt in' }),
    createdAt: z.date(),
  })
  .meta({ id: 'Memory' });

/** What an agent remembers about the caller ("Agents - Memory"): read it, forget some or all of it. */
export const memoryOperations = [
  operation({
    operationId: 'listMemories',
    method: 'get',
    path: '/v2/agents/:agentId/memories',
    tag: 'Agents - Memory',
    summary: 'What the agent remembers about you',
    ok: { json: z.object({ memories: z.array(restMemorySchema) }) },
    errors: { style: errors, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      memories: (await services.memories.list(request.viewer, request.params.agentId)).map(
        (m): z.input<typeof restMemorySchema> => ({ _id: m.id, id: m.id, fact: m.fact, session: m.sessionId, createdAt: m.createdAt }),
      ),
    }),
  }),
  operation({
    operationId: 'forgetMemories',
    method: 'delete',
    path: '/v2/agents/:agentId/memories',
    tag: 'Agents - Memory',
    summary: 'Make the agent forget everything about you',
    ok: { json: z.object({ deleted: z.number().int() }) },
    errors: { style: errors, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({ deleted: await services.memories.forget(request.viewer, request.params.agentId) }),
  }),
  operation({
    operationId: 'forgetMemory',
    method: 'delete',
    path: '/v2/agents/:agentId/memories/:memoryId',
    tag: 'Agents - Memory',
    summary: 'Make the agent forget one thing about you',
    ok: { json: z.object({ deleted: z.number().int() }) },
    errors: { style: errors, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      deleted: await services.memories.forget(request.viewer, request.params.agentId, request.params.memoryId),
    }),
  }),
];
