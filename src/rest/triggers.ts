import { z } from 'zod';
import type { Trigger } from '../generated/prisma/client.ts';
import { TriggerStatus } from '../generated/prisma/enums.ts';
import { operation } from './operation.ts';

export const restTriggerSchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    name: z.string(),
    agent: z.string(),
    user: z.string(),
    session: z.string().nullable(),
    schedule: z.object({ cron: z.string(), timezone: z.string() }),
    trigger_prompt: z.string(),
    status: z.enum(TriggerStatus),
    last_run: z.date().nullable(),
    next_run: z.date().nullable(),
    createdAt: z.date(),
  })
  .meta({ id: 'Trigger' });

export const toRestTrigger = (t: Trigger): z.input<typeof restTriggerSchema> => ({
  _id: t.id,
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

export const triggerOperations = [
  operation({
    operationId: 'listTriggers',
    method: 'get',
    path: '/v2/agents/triggers',
    tag: 'Agents - Triggers',
    summary: 'Triggers of the agents you own, newest first',
    ok: { json: z.object({ triggers: z.array(restTriggerSchema) }) },
    handler: async (request, _reply, { services }) => ({
      triggers: (await services.triggers.listMine(request.viewer)).map(toRestTrigger),
    }),
  }),
];
