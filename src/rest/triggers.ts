import type { FastifyInstance } from 'fastify';
import type { Trigger } from '../generated/prisma/client.ts';
import type { Services } from '../domain/services.ts';

export const toRestTrigger = (t: Trigger) => ({
  id: t.id,
  name: t.name,
  agent: t.agentId,
  user: t.userId,
  session: t.sessionId,
  schedule: { cron: t.cron, timezone: t.timezone },
  trigger_prompt: t.triggerPrompt,
  status: t.status,
  last_run: t.lastRun,
  next_run: t.nextRun,
  createdAt: t.createdAt,
});

export function triggerRoutes(app: FastifyInstance, services: Services) {
  app.get('/v2/agents/triggers', async (request) => ({
    triggers: (await services.triggers.listMine(request.viewer)).map(toRestTrigger),
  }));
}
