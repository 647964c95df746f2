import { z } from 'zod';
import { feedFamilies } from '../domain/core/feed-events.ts';
import type { TriggerEvent } from '../domain/triggers/index.ts';
import { resumeHeaders, resumePoint, resumeQuery } from './event-stream.ts';
import { feedFrameSchema, streamFeed } from './feed-stream.ts';
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

/** A trigger's event as REST streams it: the feed's fields in the original's snake case. */
const restTriggerEventSchema = z
  .object({
    type: z.enum(feedFamilies.trigger),
    trigger_id: z.string(),
    agent_id: z.string(),
    run_id: z.string().optional(),
    scheduled_for: z
      .string()
      .nullable()
      .optional()
      .meta({ description: 'trigger_run_started: the occurrence (UTC); null when run by hand' }),
    session_id: z.string().optional(),
    message_id: z.string().optional().meta({ description: "trigger_run_completed: the agent's reply" }),
    reason: z.string().optional().meta({ description: 'trigger_run_failed: why; trigger_paused: failures, stuck or owner' }),
    error_count: z.number().int().optional(),
    message: z.string().optional(),
    change: z.enum(['created', 'updated', 'deleted']).optional(),
    trigger: z
      .object({
        name: z.string(),
        status: z.string(),
        last_run_time: z.string().nullable(),
        next_scheduled_run: z.string().nullable(),
        error_count: z.number().int(),
        last_error: z.string().nullable(),
      })
      .optional()
      .meta({ description: 'trigger_changed: the trigger after the change (or last, when deleted)' }),
  })
  .meta({ id: 'TriggerEvent' });

const toRestTriggerEvent = (e: TriggerEvent): z.infer<typeof restTriggerEventSchema> => {
  switch (e.type) {
    case 'trigger_run_started':
      return { type: e.type, trigger_id: e.triggerId, agent_id: e.agentId, run_id: e.runId, scheduled_for: e.scheduledFor };
    case 'trigger_run_completed':
      return {
        type: e.type,
        trigger_id: e.triggerId,
        agent_id: e.agentId,
        run_id: e.runId,
        session_id: e.sessionId,
        message_id: e.messageId,
      };
    case 'trigger_run_failed':
      return { type: e.type, trigger_id: e.triggerId, agent_id: e.agentId, run_id: e.runId, reason: e.reason, error_count: e.errorCount };
    case 'trigger_paused':
      return { type: e.type, trigger_id: e.triggerId, agent_id: e.agentId, reason: e.reason, message: e.message };
    case 'trigger_finished':
      return { type: e.type, trigger_id: e.triggerId, agent_id: e.agentId };
    case 'trigger_changed':
      return {
        type: e.type,
        trigger_id: e.triggerId,
        agent_id: e.trigger.agentId,
        change: e.change,
        trigger: {
          name: e.trigger.name,
          status: e.trigger.status,
          last_run_time: e.trigger.lastRunTime,
          next_scheduled_run: e.trigger.nextScheduledRun,
          error_count: e.trigger.errorCount,
          last_error: e.trigger.lastError,
        },
      };
  }
};

export const triggerOperations = [
  operation({
    operationId: 'streamTriggerEvents',
    method: 'get',
    path: '/v2/agents/triggers/events',
    tag: TAG,
    summary:
      'Your triggers, live (SSE): runs started, completed and failed, pauses, ends and your changes; `agent_id` or `trigger_id` narrows it to one of yours; resume with Last-Event-ID or `after`',
    query: resumeQuery.extend({ agent_id: z.string().optional(), trigger_id: z.string().optional() }),
    headers: resumeHeaders,
    ok: { events: feedFrameSchema('TriggerStream', restTriggerEventSchema) },
    errors: { style, codes: ['BAD_USER_INPUT', 'FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, reply, { services, stream }) => {
      const { agent_id: agentId, trigger_id: triggerId } = request.query;
      if (agentId !== undefined) await services.triggers.listForAgent(request.viewer, agentId);
      if (triggerId !== undefined) await services.triggers.get(request.viewer, triggerId);
      const events = await services.feeds.watch(request.viewer, {
        after: resumePoint(request.headers['last-event-id'], request.query.after),
        types: feedFamilies.trigger,
        where:
          agentId === undefined && triggerId === undefined
            ? undefined
            : (e) =>
                (triggerId === undefined || e.triggerId === triggerId) &&
                (agentId === undefined || (e.type === 'trigger_changed' ? e.trigger.agentId : e.agentId) === agentId),
      });
      return streamFeed(reply, events, stream, toRestTriggerEvent);
    },
  }),
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
