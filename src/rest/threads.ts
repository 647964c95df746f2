import { z } from 'zod';
import type { MessageView, ToolCallView } from '../domain/core/events.ts';
import type { MediaLinks } from '../domain/core/media-links.ts';
import { badInput, type ErrorCode, notFound } from '../domain/core/errors.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import { paginate } from '../domain/core/page.ts';
import { MAX_ATTACHMENTS, MAX_CONTENT } from '../domain/sessions/index.ts';
import type { Services } from '../domain/services.ts';
import { TaskStatus } from '../domain/core/vocabulary.ts';
import type { Session } from '../generated/prisma/client.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { restSearchPageSchema } from './creations.ts';
import { type CreatorRow, restCreatorRefSchema, toRestCreatorRef } from './creators.ts';
import { fieldNames } from './field-names.ts';
import { operation, parseBody } from './operation.ts';

/**
 * The original's earlier name for sessions, as its SDK's `threads.*` calls them: a thread is a
 * session, read and written through the same sessions service, shown in the shapes the SDK's
 * types declare (`Thread`, with one `agent`). A thread the caller is not in is not found.
 */
const names = fieldNames({ sessionId: 'thread_id', agentIds: 'agent_id', agentId: 'agent_id', messageId: 'message_id' });
const errors: RestErrorStyle = { bodyKey: 'both', fieldName: names.toRest };
export const THREAD_NOT_FOUND = 'Thread not found';

const personSelect = { id: true, username: true, userImage: true, type: true, createdAt: true, updatedAt: true } as const;
/** The owner, and the first agent summarised: its persona and knowledge are not part of a thread. */
const threadInclude = {
  owner: { select: personSelect },
  agents: {
    orderBy: { position: 'asc' as const },
    take: 1,
    select: {
      agent: {
        select: {
          id: true,
          name: true,
          description: true,
          image: true,
          public: true,
          createdAt: true,
          updatedAt: true,
          user: { select: { username: true } },
          owner: { select: personSelect },
        },
      },
    },
  },
};
type ThreadAgentRow = {
  id: string;
  name: string;
  description: string;
  image: string | null;
  public: boolean;
  createdAt: Date;
  updatedAt: Date;
  user: { username: string };
  owner: CreatorRow;
};
type ThreadRow = Session & { owner: CreatorRow; agents: { agent: ThreadAgentRow }[] };

const threadAgentSchema = z.object({
  _id: z.string(),
  id: z.string(),
  type: z.literal('agent'),
  username: z.string().meta({ description: "The agent's key" }),
  name: z.string(),
  description: z.string(),
  userImage: z.string().nullable(),
  public: z.boolean(),
  owner: restCreatorRefSchema,
  createdAt: z.date(),
  updatedAt: z.date(),
});

const threadToolCallSchema = z.object({
  id: z.string(),
  name: z.string().meta({ description: 'The tool' }),
  tool: z.string(),
  status: z.enum(TaskStatus),
  args: z.unknown(),
  error: z.string().optional(),
  result: z
    .array(z.object({ output: z.array(z.object({ url: z.string(), filename: z.string() })), metadata: z.string() }))
    .optional()
    .meta({ description: "A completed call's result: the files it names as output, and the whole result as JSON text in metadata" }),
});

const threadMessageSchema = z.object({
  _id: z.string(),
  id: z.string(),
  role: z.enum(['user', 'assistant', 'system']).meta({ description: "parley's `eden` and `tool` messages read as system" }),
  content: z.string(),
  attachments: z.array(z.string()).optional(),
  status: z.object({ type: z.enum(['running', 'complete']), reason: z.string().optional() }).optional(),
  tool_calls: z.array(threadToolCallSchema).optional(),
  reactions: z.record(z.string(), z.array(z.string())),
  metadata: z.record(z.string(), z.string()).optional().meta({ description: "parley's role, where the thread's role differs" }),
  createdAt: z.iso.datetime(),
});

const restThreadSchema = z
  .object({
    _id: z.string(),
    id: z.string(),
    user: restCreatorRefSchema.meta({ description: 'The owner' }),
    agent: threadAgentSchema.nullable().meta({ description: 'The first of its agents; null when they were all deleted' }),
    title: z.string().optional(),
    name: z.string().meta({ description: 'The title, or "" before it has one' }),
    messages: z
      .array(threadMessageSchema)
      .meta({ description: 'The latest messages (as GET /v2/sessions/{id} pages them); empty in lists' }),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'Thread' });

/** Files a tool's result names (`{url}` objects in its lists, their links absolute), as the SDK's task outputs. */
function outputsOf(result: unknown): { url: string; filename: string }[] {
  if (typeof result !== 'object' || result === null) return [];
  return Object.values(result).flatMap((value) =>
    Array.isArray(value)
      ? value.flatMap((v) =>
          typeof v?.url === 'string'
            ? [{ url: v.url as string, filename: new URL(v.url, 'http://x').pathname.split('/').pop() || 'file' }]
            : [],
        )
      : [],
  );
}

const toThreadToolCall = (c: ToolCallView, result: unknown): z.input<typeof threadToolCallSchema> => ({
  id: c.id,
  name: c.tool,
  tool: c.tool,
  status: c.status,
  args: c.args,
  ...(c.error ? { error: c.error } : {}),
  ...(c.status === 'completed' ? { result: [{ output: outputsOf(result), metadata: JSON.stringify(result ?? null) }] } : {}),
});

function toThreadMessage(m: MessageView, links: MediaLinks): z.input<typeof threadMessageSchema> {
  const base = { _id: m.id, id: m.id, content: m.content, reactions: m.reactions, createdAt: m.createdAt };
  if (m.role === 'user') return { ...base, role: 'user', attachments: m.attachments };
  if (m.role === 'assistant')
    return {
      ...base,
      role: 'assistant',
      status:
        m.status === 'streaming'
          ? { type: 'running' }
          : m.status === 'complete'
            ? { type: 'complete' }
            : { type: 'complete', reason: m.status },
      tool_calls: m.toolCalls.map((c) => toThreadToolCall(c, links.absoluteIn(c.result))),
    };
  return { ...base, role: 'system', ...(m.role === 'system' ? {} : { metadata: { role: m.role } }) };
}

function toThread(s: ThreadRow, messages: MessageView[], links: MediaLinks): z.input<typeof restThreadSchema> {
  const agent = s.agents[0]?.agent;
  return {
    _id: s.id,
    id: s.id,
    user: toRestCreatorRef(s.owner),
    agent: agent
      ? {
          _id: agent.id,
          id: agent.id,
          type: 'agent',
          username: agent.user.username,
          name: agent.name,
          description: agent.description,
          userImage: agent.image,
          public: agent.public,
          owner: toRestCreatorRef(agent.owner),
          createdAt: agent.createdAt,
          updatedAt: agent.updatedAt,
        }
      : null,
    ...(s.title === null ? {} : { title: s.title }),
    name: s.title ?? '',
    messages: messages.map((m) => toThreadMessage(m, links)),
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
}

/** A thread the caller is in: anyone else is told it is not there. */
async function requireThread(services: Services, viewer: Viewer, id: string) {
  if (!(await services.sessions.permissionIn(viewer, id))) throw notFound(THREAD_NOT_FOUND);
}

/** `POST /v2/threads` and `/v2/threads/create`: a message to a thread, or a new thread with its agent. */
const threadMessageBody = z.object({
  thread_id: z.string().min(1).max(200).optional().meta({ description: 'The thread; without it a new one starts' }),
  agent_id: z.string().min(1).max(200).optional().meta({ description: 'The agent to answer (required for a new thread)' }),
  content: z.string({ error: 'must be text' }).min(1, 'must not be empty').max(MAX_CONTENT),
  attachments: z.array(z.string()).max(MAX_ATTACHMENTS).optional(),
});

async function postMessage(services: Services, viewer: Viewer, body: unknown) {
  const { thread_id, agent_id, content, attachments } = parseBody(threadMessageBody, body);
  if (thread_id) await requireThread(services, viewer, thread_id);
  else if (!agent_id) throw badInput('must name the agent of a new thread', ['agent_id']);
  const sent = await services.sessions.send(viewer, {
    sessionId: thread_id,
    agentIds: agent_id ? [agent_id] : undefined,
    content,
    attachments,
  });
  return { thread_id: sent.sessionId, message_id: sent.promptId, success: true };
}

const sentSchema = z.object({ thread_id: z.string(), message_id: z.string().nullable(), success: z.boolean() });
const threadPath = (summary: string) => ({
  tag: 'Threads',
  summary,
  errors: { style: errors, codes: ['NOT_FOUND', 'FORBIDDEN', 'BAD_USER_INPUT'] as ErrorCode[] },
});

export const threadOperations = [
  operation({
    operationId: 'createThread',
    method: 'post',
    path: '/v2/threads/create',
    ...threadPath('Start a thread with an agent (a session) by sending it a message, or send one to a thread'),
    body: threadMessageBody.required({ agent_id: true }),
    ok: { json: sentSchema },
    handler: async (request, _reply, { services }) => postMessage(services, request.viewer, request.body),
  }),
  operation({
    operationId: 'sendThreadMessage',
    method: 'post',
    path: '/v2/threads',
    ...threadPath('Send a message to a thread (a session), or start one with `agent_id`'),
    body: threadMessageBody,
    ok: { json: sentSchema },
    handler: async (request, _reply, { services }) => postMessage(services, request.viewer, request.body),
  }),
  operation({
    operationId: 'reactInThread',
    method: 'post',
    path: '/v2/threads/react',
    ...threadPath('React to a message of a thread (the same reaction again takes it back)'),
    body: z.object({ message_id: z.string(), reaction: z.string().meta({ description: 'thumbs_up, thumbs_down, or an emoji' }) }),
    ok: { json: z.object({ success: z.boolean() }) },
    handler: async (request, _reply, { services }) => {
      const input = names.toDomain(request.body ?? {}) as { messageId?: unknown };
      // A message of a thread the caller is not in is not found, as the thread is.
      if (typeof input.messageId === 'string') await services.sessions.message(request.viewer, input.messageId);
      await services.sessions.react(request.viewer, input);
      return { success: true };
    },
  }),
  operation({
    operationId: 'listThreads',
    method: 'get',
    path: '/v2/threads',
    ...threadPath(
      'A numbered page of your threads (sessions you own or were added to), latest activity first; it stops before LIST_PAGE_MAX_BYTES (the next page goes on from there)',
    ),
    query: z.object({
      agent_id: z.string().optional().meta({ description: 'Only threads with this agent (its id)' }),
      page: z.string().optional().meta({ description: 'From 1' }),
      limit: z.string().optional().meta({ description: '25 unless told, at most 100' }),
    }),
    ok: { json: restSearchPageSchema.extend({ docs: z.array(restThreadSchema) }) },
    handler: async (request, _reply, { services }) => {
      const { agent_id, page, limit } = request.query;
      const raw = Object.fromEntries(Object.entries({ agentId: agent_id, page, limit }).filter(([, v]) => v !== undefined));
      const numbered = await services.sessions.pageOf(request.viewer, raw, { include: threadInclude });
      return paginate(
        numbered.sessions.map((s) => toThread(s as ThreadRow, [], services.links)),
        numbered.total,
        numbered.page,
        numbered.limit,
        numbered.cut,
      );
    },
  }),
  operation({
    operationId: 'getThread',
    method: 'get',
    path: '/v2/threads/:thread_id',
    ...threadPath('A thread with its latest messages'),
    ok: { json: z.object({ thread: restThreadSchema }) },
    handler: async (request, _reply, { services }) => {
      const id = request.params.thread_id;
      await requireThread(services, request.viewer, id);
      const { session, page } = await services.sessions.withMessages(request.viewer, id, { include: threadInclude }, {});
      return { thread: toThread(session as ThreadRow, page.messages, services.links) };
    },
  }),
  operation({
    operationId: 'deleteThread',
    method: 'delete',
    path: '/v2/threads/:thread_id',
    ...threadPath('Delete a thread you own, with its messages'),
    ok: { json: z.object({ success: z.boolean() }) },
    handler: async (request, _reply, { services }) => {
      await requireThread(services, request.viewer, request.params.thread_id);
      await services.sessions.delete(request.viewer, request.params.thread_id);
      return { success: true };
    },
  }),
];
