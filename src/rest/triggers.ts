import { z } from 'zod';
import { operation } from './operation.ts';
import {
  restTriggerCreateBody,
  restTriggerPatchBody,
  restTriggerQuery,
  restTriggerRunSchema,
  restTriggerSchema,
  type RestTriggerRow,
  toRestTrigger,
  toRestTriggerRun,
  triggerBodyToDomain,
  triggerErrors as style,
} from './trigger-shapes.ts';

export { restTriggerSchema } from './trigger-shapes.ts';

const TAG = 'Agents - Triggers';
const triggers = z.object({ triggers: z.array(restTriggerSchema) });
const one = z.object({ trigger: restTriggerSchema });

export const triggerOperations = [
  operation({
    operationId: 'listTriggers',
    method: 'get',
    path: '/v2/agents/triggers',
    tag: TAG,
    summary: 'Triggers of the agents you own, newest first',
    ok: { json: triggers },
    handler: async (request, _reply, { services }) => ({
      triggers: ((await services.triggers.listMine(request.viewer, restTriggerQuery)) as RestTriggerRow[]).map(toRestTrigger),
    }),
  }),
  operation({
    operationId: 'listAgentTriggers',
    method: 'get',
    path: '/v2/agents/:agentId/triggers',
    tag: TAG,
    summary: 'The triggers of an agent you own, newest first',
    ok: { json: triggers },
    errors: { style, codes: ['FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      triggers: ((await services.triggers.listForAgent(request.viewer, request.params.agentId, restTriggerQuery)) as RestTriggerRow[]).map(
        toRestTrigger,
      ),
    }),
  }),
  operation({
    operationId: 'createTrigger',
    method: 'post',
    path: '/v2/agents/:agentId/triggers',
    tag: TAG,
    summary: 'Schedule a prompt for an agent you own (a schedule of null: run only by hand)',
    body: restTriggerCreateBody,
    ok: { json: z.object({ triggerId: z.string(), trigger: restTriggerSchema }) },
    errors: { style, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT', 'UNPROCESSABLE'] },
    handler: async (request, _reply, { services }) => {
      const created = await services.triggers.create(
        request.viewer,
        request.params.agentId,
        triggerBodyToDomain(request.body ?? {}),
        restTriggerQuery,
      );
      return { triggerId: created.id, trigger: toRestTrigger(created as RestTriggerRow) };
    },
  }),
  operation({
    operationId: 'getTrigger',
    method: 'get',
    path: '/v2/agents/:agentId/triggers/:triggerId',
    tag: TAG,
    summary: 'One trigger of an agent you own',
    ok: { json: one },
    errors: { style, codes: ['FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      const { agentId, triggerId } = request.params;
      return {
        trigger: toRestTrigger((await services.triggers.get(request.viewer, triggerId, restTriggerQuery, agentId)) as RestTriggerRow),
      };
    },
  }),
  operation({
    operationId: 'updateTrigger',
    method: 'patch',
    path: '/v2/agents/:agentId/triggers/:triggerId',
    tag: TAG,
    summary: 'Change a trigger (only the fields sent); status paused pauses it, active resumes it',
    body: restTriggerPatchBody,
    ok: { json: one },
    errors: { style, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const { agentId, triggerId } = request.params;
      const updated = await services.triggers.update(
        request.viewer,
        triggerId,
        triggerBodyToDomain(request.body ?? {}),
        restTriggerQuery,
        agentId,
      );
      return { trigger: toRestTrigger(updated as RestTriggerRow) };
    },
  }),
  operation({
    operationId: 'deleteTrigger',
    method: 'delete',
    path: '/v2/agents/:agentId/triggers/:triggerId',
    tag: TAG,
    summary: 'Delete a trigger and its runs (the sessions it made stay)',
    ok: { json: z.object({ success: z.literal(true) }) },
    errors: { style, codes: ['FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      await services.triggers.remove(request.viewer, request.params.triggerId, request.params.agentId);
      return { success: true as const };
    },
  }),
  operation({
    operationId: 'runTrigger',
    method: 'post',
    path: '/v2/agents/:agentId/triggers/:triggerId/run',
    tag: TAG,
    summary: 'Run a trigger now, whatever its schedule (409 while a run is under way)',
    ok: { json: z.object({ run: restTriggerRunSchema, trigger: restTriggerSchema }) },
    errors: { style, codes: ['FORBIDDEN', 'NOT_FOUND', 'CONFLICT'] },
    handler: async (request, _reply, { services }) => {
      const { agentId, triggerId } = request.params;
      const run = await services.triggers.runNow(request.viewer, triggerId, agentId);
      const trigger = (await services.triggers.get(request.viewer, triggerId, restTriggerQuery, agentId)) as RestTriggerRow;
      return { run: toRestTriggerRun(run), trigger: toRestTrigger(trigger) };
    },
  }),
];
