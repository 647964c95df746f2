import { queryFromInfo } from '@pothos/plugin-prisma';
import { visibleCreations } from '../../domain/discovery/index.ts';
import { canReadTask, outputTypeOf } from '../../domain/tasks/index.ts';
import { type FeedEventOf, feedFamilies } from '../../domain/core/feed-events.ts';
import { builder } from '../builder.ts';
import { feedEventInterface, followFeed } from '../feed.ts';
import { rawIdOf } from '../global-ids.ts';
import { toConnection } from '../connection.ts';
import { viewerOf } from '../context.ts';
import { Agent, readableAgent } from './agent.ts';
import { Creation } from './creation.ts';
import { OutputTypeEnum, SortDirectionEnum, TaskOrderEnum, TaskStatusEnum, TaskTypeEnum } from './enums.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';
import { Tool } from './tool.ts';

export const Task = builder.prismaObject('Task', {
  interfaces: nodeInterfaces,
  description:
    'A tool run, and what it cost: one made by itself (createTask), or a tool call of a reply (with its session and message). Charged to its owner.',
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Task', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    toolKey: t.exposeString('tool'),
    tool: t.field({ type: Tool, nullable: true, resolve: (task, _, ctx) => ctx.services.tools.get(task.tool) ?? null }),
    outputType: t.field({
      type: OutputTypeEnum,
      nullable: true,
      resolve: (task, _, ctx) => outputTypeOf(ctx.services.tools, task.tool),
    }),
    args: t.expose('args', { type: 'JSON', description: 'As they were given. In lists, {} when over 4 KiB (see truncated).' }),
    status: t.expose('status', { type: TaskStatusEnum }),
    progress: t.exposeFloat('progress', { description: 'From 0 to 1, as its tool reports it; 1 once completed.' }),
    result: t.field({
      type: 'JSON',
      nullable: true,
      description: "The tool's answer once completed. In lists, null when over 4 KiB (see truncated).",
      resolve: (task, _, ctx) => ctx.services.links.absoluteIn(task.result),
    }),
    truncated: t.stringList({
      description: 'In lists: the fields (args, result) left out for their size; the task by its id has them whole.',
      resolve: (task) => (task as { elided?: string[] }).elided ?? [],
    }),
    error: t.exposeString('error', { nullable: true }),
    cost: t.float({
      nullable: true,
      description: 'Manna held for it: charged if it completes, returned otherwise.',
      resolve: (task) => task.cost?.toNumber() ?? null,
    }),
    public: t.exposeBoolean('public'),
    owner: t.relation('user', { description: 'Whose task it is: who asked for it, or who pays for it.' }),
    agent: t.field({
      type: Agent,
      nullable: true,
      description: 'For a tool call of a reply: the agent that asked for it.',
      select: (_args, _ctx, nested) => ({ agent: nested(true) }),
      resolve: (task, _args, ctx) => readableAgent(ctx, task.agent),
    }),
    sessionId: t.globalID({
      nullable: true,
      description: 'For a tool call of a reply: its session.',
      resolve: (task) => (task.sessionId ? { type: 'Session', id: task.sessionId } : null),
    }),
    messageId: t.globalID({
      nullable: true,
      description: 'For a tool call of a reply: the message it belongs to.',
      resolve: (task) => (task.messageId ? { type: 'Message', id: task.messageId } : null),
    }),
    outputs: t.relation('creations', {
      description: 'The creations it made that you may see.',
      query: (_args, ctx) => ({ where: visibleCreations(viewerOf(ctx)), orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] }),
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const TaskFilter = builder.inputType('TaskFilter', {
  description: 'Which of your tasks: the filters of the original’s task list.',
  fields: (t) => ({
    status: t.field({ type: [TaskStatusEnum] }),
    taskIds: t.idList(),
    type: t.field({ type: TaskTypeEnum }),
    outputType: t.field({ type: OutputTypeEnum }),
    tool: t.string(),
    sessionId: t.id({ description: 'Only the tool calls of this session.' }),
    minDate: t.field({ type: 'DateTime', description: 'Only tasks created at or after this time.' }),
    orderBy: t.field({ type: TaskOrderEnum, description: 'CREATED_AT unless told.' }),
    direction: t.field({ type: SortDirectionEnum, description: 'DESC unless told.' }),
  }),
});

/** GraphQL's filter as the domain's input: nulls are "not given". */
const filterInput = (filter: Record<string, unknown> | null | undefined) =>
  Object.fromEntries(
    Object.entries(filter ?? {})
      .filter(([, v]) => v != null)
      .map(([k, v]) => [k === 'taskIds' ? 'taskId' : k, v]),
  );

builder.queryFields((t) => ({
  task: t.prismaField({
    type: 'Task',
    description: 'A task of yours, or a public one.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, { id }, ctx) => ctx.services.tasks.get(viewerOf(ctx), String(id), query),
  }),
  tasks: t.connection({
    type: Task,
    description: 'Your tasks, the tool calls of your replies among them: everything your manna paid for (forward paging only).',
    args: { filter: t.arg({ type: TaskFilter }) },
    resolve: async (_root, args, ctx, info) => {
      const { tasks, hasNextPage, cursor } = await ctx.services.tasks.connection(
        viewerOf(ctx),
        filterInput(args.filter),
        { first: args.first ?? undefined, after: args.after ?? undefined, last: args.last ?? undefined, before: args.before ?? undefined },
        queryFromInfo({ context: ctx, info, path: ['edges', 'node'] }),
      );
      return toConnection(tasks, cursor, { hasNextPage, hasPreviousPage: Boolean(args.after) });
    },
  }),
  estimateTaskCost: t.float({
    description: 'The manna createTask would hold for this tool and these arguments.',
    args: { tool: t.arg.string({ required: true }), args: t.arg({ type: 'JSON' }) },
    resolve: (_root, input, ctx) => ctx.services.tasks.estimate(viewerOf(ctx), { tool: input.tool, args: input.args ?? {} }).cost,
  }),
}));

builder.mutationFields((t) => ({
  createTask: t.prismaField({
    type: 'Task',
    description: 'Runs a tool: its cost is held at once (INSUFFICIENT_MANNA when the balance cannot cover it), charged if it completes.',
    args: { tool: t.arg.string({ required: true }), args: t.arg({ type: 'JSON' }), makePublic: t.arg.boolean() },
    resolve: (query, _root, input, ctx) =>
      ctx.services.tasks.create(
        viewerOf(ctx),
        { tool: input.tool, args: input.args ?? {}, ...(input.makePublic != null ? { makePublic: input.makePublic } : {}) },
        query,
      ),
  }),
  cancelTask: t.prismaField({
    type: 'Task',
    description: 'Cancels a pending or running task of yours (its hold comes back); an ended one is left as it is.',
    args: { taskId: t.arg.id({ required: true }) },
    resolve: async (query, _root, { taskId }, ctx) => {
      const viewer = viewerOf(ctx);
      await ctx.services.tasks.cancel(viewer, { taskId: String(taskId) });
      return ctx.services.tasks.get(viewer, String(taskId), query);
    },
  }),
}));

builder.prismaObjectField(Creation, 'task', (t) =>
  t.field({
    type: Task,
    nullable: true,
    description: 'The task that made it, when you may see that task (yours, or public).',
    select: (_args, _ctx, nested) => ({ task: nested(true) }),
    resolve: (creation, _args, ctx) => (creation.task && canReadTask(viewerOf(ctx), creation.task) ? creation.task : null),
  }),
);

type TaskFeedEvent = FeedEventOf<(typeof feedFamilies.task)[number]>;

const TaskEventOutput = builder.objectRef<{ creationId: string; url: string; thumbnail: string | null }>('TaskEventOutput').implement({
  description: 'A creation a task made, as its completion names it.',
  fields: (t) => ({
    creationId: t.globalID({ resolve: (o) => ({ type: 'Creation', id: o.creationId }) }),
    rawCreationId: t.exposeID('creationId', { description: RAW_ID }),
    url: t.string({ resolve: (o, _, ctx) => ctx.services.links.absolute(o.url) }),
    thumbnail: t.string({ nullable: true, resolve: (o, _, ctx) => ctx.services.links.absolute(o.thumbnail) }),
  }),
});

// Typed with the whole family: an event type added to it does not compile until it is shown here.
const TaskEvent = feedEventInterface<TaskFeedEvent['type']>('TaskEvent', 'A change of one of your tasks.', {
  task_created: {
    name: 'TaskCreated',
    description: 'A task of yours was created, its cost held.',
    fields: (t) => ({
      taskId: t.globalID({ resolve: (e) => ({ type: 'Task', id: e.taskId }) }),
      rawTaskId: t.exposeID('taskId', { description: RAW_ID }),
      toolKey: t.string({ resolve: (e) => e.task.tool }),
      cost: t.float({ description: 'Manna held for it.', resolve: (e) => e.task.cost }),
      task: t.field({
        type: Task,
        description: 'The task as it is now.',
        resolve: (e, _args, ctx) => ctx.services.tasks.get(viewerOf(ctx), e.taskId),
      }),
    }),
  },
  task_started: {
    name: 'TaskStarted',
    description: 'It got its turn, and its tool is running.',
    fields: (t) => ({
      taskId: t.globalID({ resolve: (e) => ({ type: 'Task', id: e.taskId }) }),
      rawTaskId: t.exposeID('taskId', { description: RAW_ID }),
    }),
  },
  task_progress: {
    name: 'TaskProgressed',
    description: 'How far it is; progress only grows.',
    fields: (t) => ({
      taskId: t.globalID({ resolve: (e) => ({ type: 'Task', id: e.taskId }) }),
      rawTaskId: t.exposeID('taskId', { description: RAW_ID }),
      progress: t.exposeFloat('progress', { description: 'From 0 to 1.' }),
      message: t.exposeString('message', { nullable: true, description: 'What it is doing, when the tool says.' }),
    }),
  },
  task_completed: {
    name: 'TaskCompleted',
    description: 'It completed: its hold is its charge.',
    fields: (t) => ({
      taskId: t.globalID({ resolve: (e) => ({ type: 'Task', id: e.taskId }) }),
      rawTaskId: t.exposeID('taskId', { description: RAW_ID }),
      result: t.field({
        type: 'JSON',
        nullable: true,
        description: "The tool's answer.",
        resolve: (e, _, ctx) => ctx.services.links.absoluteIn(e.result),
      }),
      outputs: t.field({ type: [TaskEventOutput], description: 'The creations it made.', resolve: (e) => e.outputs }),
      cost: t.exposeFloat('cost', { description: 'What it was charged.' }),
      task: t.field({
        type: Task,
        description: 'The task as it is now.',
        resolve: (e, _args, ctx) => ctx.services.tasks.get(viewerOf(ctx), e.taskId),
      }),
    }),
  },
  task_failed: {
    name: 'TaskFailed',
    description: 'It failed: its hold was returned.',
    fields: (t) => ({
      taskId: t.globalID({ resolve: (e) => ({ type: 'Task', id: e.taskId }) }),
      rawTaskId: t.exposeID('taskId', { description: RAW_ID }),
      error: t.exposeString('error'),
    }),
  },
  task_cancelled: {
    name: 'TaskCancelled',
    description: 'You cancelled it: its hold was returned.',
    fields: (t) => ({
      taskId: t.globalID({ resolve: (e) => ({ type: 'Task', id: e.taskId }) }),
      rawTaskId: t.exposeID('taskId', { description: RAW_ID }),
    }),
  },
  tool_approval_requested: {
    name: 'TaskApprovalRequested',
    description: 'A reply paused at a tool call of yours: approve or deny it with settleToolApproval (nothing is charged until it runs).',
    fields: (t) => ({
      taskId: t.globalID({ resolve: (e) => ({ type: 'Task', id: e.taskId }) }),
      rawTaskId: t.exposeID('taskId', { description: RAW_ID }),
      sessionId: t.globalID({ resolve: (e) => ({ type: 'Session', id: e.sessionId }) }),
      messageId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.messageId }) }),
      agentId: t.globalID({ resolve: (e) => ({ type: 'Agent', id: e.agentId }) }),
      toolKey: t.exposeString('tool'),
      args: t.field({ type: 'JSON', resolve: (e, _, ctx) => ctx.services.links.absoluteIn(e.args) }),
      cost: t.exposeFloat('cost', { description: 'What it would be charged, if approved.' }),
      expiresAt: t.field({ type: 'DateTime', description: 'When it counts as denied, unanswered.', resolve: (e) => new Date(e.expiresAt) }),
    }),
  },
});

builder.subscriptionFields((t) => ({
  taskUpdates: t.field({
    type: TaskEvent,
    description:
      'Your tasks as they change, live: created, started, progress, completed (with the result), failed, cancelled. With taskId, one task of yours; with after, first every event of your feed after that seq.',
    args: { taskId: t.arg.id(), after: t.arg({ type: 'Seq' }) },
    ...followFeed(feedFamilies.task, ({ taskId }: { taskId?: string | number | null; after?: number | null }, viewer, ctx) =>
      taskId == null ? undefined : ctx.services.tasks.followed(viewer, rawIdOf(String(taskId))),
    ),
  }),
}));
