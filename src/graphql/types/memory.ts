import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';
import { Agent } from './agent.ts';

export const Memory = builder.prismaObject('Memory', {
  description: 'A short fact an agent keeps about you between sessions.',
  fields: (t) => ({
    id: t.exposeID('id'),
    fact: t.exposeString('fact'),
    sessionId: t.globalID({
      nullable: true,
      description: 'The session it was learnt in (if it still exists).',
      resolve: (m) => (m.sessionId ? { type: 'Session', id: m.sessionId } : null),
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.objectField(Agent, 'memories', (t) =>
  t.prismaField({
    type: ['Memory'],
    description: 'What this agent remembers about you, newest first (never about anyone else).',
    resolve: (_query, agent, _args, ctx) => ctx.services.memories.list(viewerOf(ctx), agent.id),
  }),
);

builder.mutationField('forgetMemory', (t) =>
  t.int({
    description: 'Makes an agent forget one fact about you (memoryId), or everything; returns how many were forgotten.',
    args: { agentId: t.arg.id({ required: true }), memoryId: t.arg.id() },
    resolve: (_root, { agentId, memoryId }, ctx) =>
      ctx.services.memories.forget(viewerOf(ctx), String(agentId), memoryId == null ? undefined : String(memoryId)),
  }),
);
