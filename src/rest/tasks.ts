import { z } from 'zod';
import { cancelTaskSchema, costTaskSchema, createTaskSchema, taskPageSchema, taskStatuses } from '../domain/tasks/index.ts';
import { paginate } from '../domain/core/page.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { restSearchPageSchema } from './creations.ts';
import { operation } from './operation.ts';
import { feedFamilies } from '../domain/core/feed-events.ts';
import { resumeHeaders, resumePoint, resumeQuery } from './event-stream.ts';
import { feedFrameSchema, streamFeed } from './feed-stream.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import { isDomainError } from '../domain/core/errors.ts';
import type { Services } from '../domain/services.ts';
import type { NamedFrames } from './event-stream.ts';
import {
  restTaskEventSchema,
  restTaskQuery,
  restTaskSchema,
  type TaskFeedEvent,
  taskNames,
  toRestTask,
  toRestTaskEvent,
} from './task-shapes.ts';

/** The original's clients read `error` or `message`: both, with the field named in REST's spelling. */
const errors: RestErrorStyle = { bodyKey: 'both', fieldName: taskNames.toRest };

/** The query of `GET /v2/tasks` as callers spell it; repeated or comma-separated values for the lists. */
const listQuery = taskNames.schema(taskPageSchema);

/**
 * The original's frames on the task stream: `task-update` events whose data is the task as
 * `GET /v2/tasks/{id}` shows it (and its id as `taskId`), what the original's SDK waits on in
 * `createV2(input)`. One as the stream opens on `?taskId=` (a task that ended before its client
 * listened is told so), then one before each of parley's own frames.
 */
function taskUpdateFrames(viewer: Viewer, services: Services, taskId: string | undefined): NamedFrames<TaskFeedEvent> {
  const frame = async (id: string) => {
    try {
      const task = toRestTask(viewer, services.tools, await services.tasks.get(viewer, id, restTaskQuery), services.links);
      return { event: 'task-update', data: { ...task, taskId: task._id } };
    } catch (e) {
      // Deleted with its user meanwhile: there is nothing left to show.
      if (isDomainError(e) && e.code === 'NOT_FOUND') return null;
      throw e;
    }
  };
  return {
    opening: async () => (taskId === undefined ? [] : [await frame(taskId)].filter((f) => f !== null)),
    before: (event) => frame(event.taskId),
  };
}

/** Tasks: a tool run by itself, charged as it is created and followed as it runs (`docs/tasks.md`). */
export const taskOperations = [
  operation({
    operationId: 'createTask',
    method: 'post',
    path: '/v2/tasks/create',
    tag: 'Tasks',
    summary: 'Run a tool: its cost is held at once (402 when the balance cannot cover it), charged if it completes, returned otherwise',
    body: createTaskSchema,
    ok: { json: z.object({ task: restTaskSchema }) },
    errors: { style: errors, codes: ['BAD_USER_INPUT', 'INSUFFICIENT_MANNA'] },
    handler: async (request, _reply, { services }) => ({
      task: toRestTask(
        request.viewer,
        services.tools,
        await services.tasks.create(request.viewer, request.body ?? {}, restTaskQuery),
        services.links,
      ),
    }),
  }),
  operation({
    operationId: 'estimateTaskCost',
    method: 'post',
    path: '/v2/tasks/cost',
    tag: 'Tasks',
    summary: 'What creating this task would take, in manna',
    body: costTaskSchema,
    ok: { json: z.object({ cost: z.number().meta({ description: 'The manna POST /v2/tasks/create holds for the same tool and args' }) }) },
    errors: { style: errors, codes: ['BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => services.tasks.estimate(request.viewer, request.body ?? {}),
  }),
  operation({
    operationId: 'listTasks',
    method: 'get',
    path: '/v2/tasks',
    tag: 'Tasks',
    summary:
      'A numbered page of your tasks, the tool calls of your replies among them (everything your manna paid for); it stops before LIST_PAGE_MAX_BYTES (the next page goes on from there)',
    query: listQuery,
    ok: {
      json: restSearchPageSchema
        .extend({
          docs: z.array(restTaskSchema),
          prevPage: z.number().int().optional().meta({ description: 'Absent on the first page' }),
          nextPage: z.number().int().optional().meta({ description: 'Absent on the last page' }),
        })
        .meta({ id: 'TaskPage' }),
    },
    errors: { style: errors, codes: ['BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const { tasks, total, page, limit, cut } = await services.tasks.page(
        request.viewer,
        taskNames.toDomain(request.query),
        restTaskQuery,
      );
      const docs = tasks.map((t) => toRestTask(request.viewer, services.tools, t, services.links));
      // The SDK types these two as a number or absent (docs/compatibility.md), so no page is no field.
      const { prevPage, nextPage, ...numbers } = paginate(docs, total, page, limit, cut);
      return { ...numbers, ...(prevPage === null ? {} : { prevPage }), ...(nextPage === null ? {} : { nextPage }) };
    },
  }),
  operation({
    operationId: 'streamTaskEvents',
    method: 'get',
    path: '/v2/tasks/events',
    tag: 'Tasks',
    summary:
      "Your tasks as they change, live (Server-Sent Events): created, started, progress, completed, failed, cancelled; one task with taskId; resumable with Last-Event-ID or ?after. Beside these unnamed frames, named `task-update` frames carry the task as GET /v2/tasks/{taskId} shows it (the original's SDK waits on them): one first with taskId, then one before each change",
    query: resumeQuery.extend({ taskId: z.string().min(1).max(100).optional().meta({ description: 'Only this task of yours' }) }),
    headers: resumeHeaders,
    ok: { events: feedFrameSchema('TaskStream', restTaskEventSchema) },
    errors: { style: errors, codes: ['BAD_USER_INPUT', 'NOT_FOUND', 'TOO_MANY_SUBSCRIPTIONS'] },
    handler: async (request, reply, { services, stream }) => {
      const { taskId } = request.query;
      const where = taskId === undefined ? undefined : await services.tasks.followed(request.viewer, taskId);
      const events = await services.feeds.watch(request.viewer, {
        after: resumePoint(request.headers['last-event-id'], request.query.after),
        types: feedFamilies.task,
        where,
      });
      return streamFeed(
        reply,
        events,
        stream,
        (e) => toRestTaskEvent(e, services.links),
        taskUpdateFrames(request.viewer, services, taskId),
      );
    },
  }),
  operation({
    operationId: 'getTask',
    method: 'get',
    path: '/v2/tasks/:taskId',
    tag: 'Tasks',
    summary: 'A task of yours, or a public one',
    ok: { json: z.object({ task: restTaskSchema }) },
    errors: { style: errors, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      task: toRestTask(
        request.viewer,
        services.tools,
        await services.tasks.get(request.viewer, request.params.taskId, restTaskQuery),
        services.links,
      ),
    }),
  }),
  operation({
    operationId: 'cancelTask',
    method: 'post',
    path: '/v2/tasks/cancel',
    tag: 'Tasks',
    summary: 'Cancel a pending or running task of yours (its hold comes back); an ended one stays as it is',
    body: cancelTaskSchema,
    ok: { json: z.object({ taskStatus: z.enum(taskStatuses).meta({ description: 'The status after: cancelled, or how it had ended' }) }) },
    errors: { style: errors, codes: ['BAD_USER_INPUT', 'NOT_FOUND', 'FORBIDDEN'] },
    handler: async (request, _reply, { services }) => services.tasks.cancel(request.viewer, request.body ?? {}),
  }),
];
