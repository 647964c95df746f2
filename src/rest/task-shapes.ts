import { z } from 'zod';
import type { FeedEventOf, feedFamilies } from '../domain/core/feed-events.ts';
import type { MediaLinks } from '../domain/core/media-links.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import { isVisibleTo } from '../domain/core/visibility.ts';
import { outputTypes, taskStatuses, type ListedTask, type TaskRead } from '../domain/tasks/index.ts';
import type { ToolRegistry } from '../domain/tools/index.ts';
import type { Prisma } from '../generated/prisma/client.ts';
import { restCreatorRefSchema, toRestCreatorRef } from './creators.ts';
import { fieldNames } from './field-names.ts';

/** REST spells these as the original did. */
export const taskNames = fieldNames({ outputType: 'output_type', sessionId: 'session_id' });

/** What REST reads with a task: its user (shown populated) and the creations it made (its outputs). */
export const restTaskInclude = {
  user: true,
  creations: {
    orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
    select: { id: true, userId: true, url: true, thumbnail: true, filename: true, mediaAttributes: true, public: true, deleted: true },
  },
} satisfies Prisma.TaskInclude;
export const restTaskQuery = { include: restTaskInclude };
type RestTaskRow = TaskRead<typeof restTaskQuery> & { elided?: ListedTask<typeof restTaskQuery>['elided'] };

const restOutputSchema = z
  .object({
    url: z.string(),
    thumbnail: z.string().nullable(),
    filename: z.string(),
    mediaAttributes: z.object({ type: z.string(), mimeType: z.string() }).catchall(z.unknown()),
    creationId: z.string().meta({ description: 'The creation this output is' }),
  })
  .meta({ id: 'TaskOutput' });

export const restTaskSchema = z
  .object({
    _id: z.string(),
    id: z.string().meta({ description: 'The same as _id' }),
    user: restCreatorRefSchema.meta({ description: 'Whose task it is: who asked, or who pays for it' }),
    agent: z.string().nullable().meta({ description: 'For a tool call of a reply: the agent that asked for it' }),
    session: z.string().nullable().meta({ description: 'For a tool call of a reply: its session' }),
    message: z.string().nullable().meta({ description: 'For a tool call of a reply: the message it belongs to' }),
    tool: z.string(),
    output_type: z
      .enum(outputTypes)
      .optional()
      .meta({ description: "The tool's output type; absent for a tool the registry no longer has" }),
    args: z.record(z.string(), z.unknown()).meta({ description: 'The arguments as they were given' }),
    cost: z.number().nullable().meta({ description: 'Manna held for it: charged if it completes, returned otherwise' }),
    status: z.enum(taskStatuses),
    progress: z.number().min(0).max(1),
    result: z
      .array(
        z.object({
          output: z.array(restOutputSchema),
          metadata: z.null(),
          data: z.unknown().meta({ description: "The tool's own answer (what a reply's model was told)" }),
        }),
      )
      .meta({ description: 'One entry once completed (its outputs, and the tool’s answer); empty before and after failing' }),
    error: z.string().nullable(),
    public: z.boolean(),
    truncated: z
      .array(z.enum(['args', 'result']))
      .optional()
      .meta({ description: 'In lists: fields over 4 KiB, left out here ({} and no data); GET /v2/tasks/{taskId} has them whole' }),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'Task' });

/** An output's file name: its own, or the last part of its URL (stored relative to the service, or another host's). */
const fileName = (c: { id: string; url: string; filename: string | null }) =>
  c.filename ?? (decodeURIComponent(new URL(c.url, 'http://x').pathname.split('/').pop() ?? '') || c.id);

/**
 * A task as REST shows it to `viewer`: its outputs are the creations it made that the viewer may
 * see; their links, and those in its result, absolute (`links`).
 */
export function toRestTask(viewer: Viewer, registry: ToolRegistry, t: RestTaskRow, links: MediaLinks): z.input<typeof restTaskSchema> {
  const outputType = registry.get(t.tool)?.output_type;
  const outputs = t.creations
    .filter((c) => !c.deleted && isVisibleTo(viewer, c, c.userId))
    .map((c) => ({
      url: links.absolute(c.url),
      thumbnail: links.absolute(c.thumbnail),
      filename: fileName(c),
      mediaAttributes: { type: outputType ?? 'image', mimeType: 'application/octet-stream', ...(c.mediaAttributes as object) },
      creationId: c.id,
    }));
  const truncated = t.elided?.length ? { truncated: t.elided } : {};
  return {
    _id: t.id,
    id: t.id,
    user: toRestCreatorRef(t.user),
    agent: t.agentId,
    session: t.sessionId,
    message: t.messageId,
    tool: t.tool,
    ...(outputType ? { output_type: outputType } : {}),
    args: t.args !== null && typeof t.args === 'object' && !Array.isArray(t.args) ? (t.args as Record<string, unknown>) : {},
    cost: t.cost?.toNumber() ?? null,
    status: t.status,
    progress: t.progress,
    result: t.status === 'completed' ? [{ output: outputs, metadata: null, data: links.absoluteIn(t.result) }] : [],
    error: t.error,
    public: t.public,
    ...truncated,
    createdAt: t.createdAt,
    updatedAt: t.updatedAt,
  };
}

/** The events of a task, as `GET /v2/tasks/events` streams them (`data` of its update frames). */
export type TaskFeedEvent = FeedEventOf<(typeof feedFamilies.task)[number]>;

const eventBase = {
  taskId: z.string(),
  at: z.string().meta({ description: 'When it happened (ISO 8601)' }),
};
const restTaskEventOutputSchema = z
  .object({ creationId: z.string(), url: z.string(), thumbnail: z.string().nullable() })
  .meta({ id: 'TaskEventOutput' });

export const restTaskEventSchema = z
  .discriminatedUnion('type', [
    z
      .object({
        type: z.literal('task_created'),
        ...eventBase,
        task: z.object({
          _id: z.string(),
          tool: z.string(),
          output_type: z.string().nullable(),
          status: z.enum(taskStatuses),
          cost: z.number().meta({ description: 'Manna held for it' }),
          agent: z.string().nullable(),
          session: z.string().nullable(),
          createdAt: z.string(),
        }),
      })
      .meta({ id: 'TaskCreatedEvent', description: 'A task of yours was created (its hold taken)' }),
    z
      .object({ type: z.literal('task_started'), ...eventBase })
      .meta({ id: 'TaskStartedEvent', description: 'It got its turn, and its tool is running' }),
    z
      .object({
        type: z.literal('task_progress'),
        ...eventBase,
        progress: z.number().min(0).max(1),
        message: z.string().nullable().meta({ description: 'What it is doing, when the tool says' }),
      })
      .meta({ id: 'TaskProgressEvent', description: 'How far it is; progress only grows' }),
    z
      .object({
        type: z.literal('task_completed'),
        ...eventBase,
        result: z.unknown().meta({ description: "The tool's own answer" }),
        outputs: z.array(restTaskEventOutputSchema).meta({ description: 'The creations it made' }),
        cost: z.number().meta({ description: 'What it was charged (its hold)' }),
      })
      .meta({ id: 'TaskCompletedEvent', description: 'It completed: its hold is its charge' }),
    z
      .object({ type: z.literal('task_failed'), ...eventBase, error: z.string() })
      .meta({ id: 'TaskFailedEvent', description: 'It failed: its hold was returned' }),
    z
      .object({ type: z.literal('task_cancelled'), ...eventBase })
      .meta({ id: 'TaskCancelledEvent', description: 'Its owner cancelled it: its hold was returned' }),
    z
      .object({
        type: z.literal('tool_approval_requested'),
        ...eventBase,
        session: z.string(),
        message: z.string().meta({ description: 'The reply paused at the call' }),
        agent: z.string(),
        tool: z.string(),
        args: z.unknown(),
        cost: z.number().meta({ description: 'What it would be charged, if approved' }),
        expires_at: z.string().meta({ description: 'When it counts as denied, unanswered (ISO 8601)' }),
      })
      .meta({
        id: 'ToolApprovalRequestedEvent',
        description: 'A reply paused at a tool call of yours: approve or deny it with POST /v2/sessions/{session}/approvals/{taskId}',
      }),
  ])
  .meta({ id: 'TaskEvent' });

type RestTaskEvent = z.input<typeof restTaskEventSchema>;

/** One entry per type of the task family: a type added to the family does not compile until it is here. */
const restTaskEventOf: { [T in TaskFeedEvent['type']]: (e: FeedEventOf<T>, links: MediaLinks) => RestTaskEvent } = {
  task_created: (e) => ({
    type: e.type,
    taskId: e.taskId,
    at: e.at,
    task: {
      _id: e.task.id,
      tool: e.task.tool,
      output_type: e.task.outputType,
      status: e.task.status,
      cost: e.task.cost,
      agent: e.task.agentId,
      session: e.task.sessionId,
      createdAt: e.task.createdAt,
    },
  }),
  task_started: (e) => ({ type: e.type, taskId: e.taskId, at: e.at }),
  task_progress: (e) => ({ type: e.type, taskId: e.taskId, at: e.at, progress: e.progress, message: e.message }),
  task_completed: (e, links) => ({
    type: e.type,
    taskId: e.taskId,
    at: e.at,
    result: links.absoluteIn(e.result),
    outputs: links.absoluteIn(e.outputs),
    cost: e.cost,
  }),
  task_failed: (e) => ({ type: e.type, taskId: e.taskId, at: e.at, error: e.error }),
  task_cancelled: (e) => ({ type: e.type, taskId: e.taskId, at: e.at }),
  tool_approval_requested: (e, links) => ({
    type: e.type,
    taskId: e.taskId,
    at: e.at,
    session: e.sessionId,
    message: e.messageId,
    agent: e.agentId,
    tool: e.tool,
    args: links.absoluteIn(e.args),
    cost: e.cost,
    expires_at: e.expiresAt,
  }),
};

/** A task event as REST streams it: named fields, never the stored event passed through; media links absolute. */
export const toRestTaskEvent = (e: TaskFeedEvent, links: MediaLinks): RestTaskEvent =>
  (restTaskEventOf[e.type] as (e: TaskFeedEvent, links: MediaLinks) => RestTaskEvent)(e, links);
