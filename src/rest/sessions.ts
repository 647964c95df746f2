import { z } from 'zod';
import { pageSchema } from '../domain/core/cursors.ts';
import { badInput, forbidden, notFound } from '../domain/core/errors.ts';
import { paginate } from '../domain/core/page.ts';
import { SESSION_NOT_FOUND } from '../domain/access/index.ts';
import { settleApprovalSchema } from '../domain/approvals/index.ts';
import {
  AGENT_IDS_REQUIRED,
  autonomySettingsSchema,
  DEFAULT_MESSAGE_PAGE,
  MAX_MESSAGE_PAGE,
  numberedPageSchema,
  reactionSchema,
  sendMessageSchema,
  whileReplyingSchema,
} from '../domain/sessions/index.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { restSearchPageSchema } from './creations.ts';
import { resumeHeaders, resumePoint, resumeQuery } from './event-stream.ts';
import { fieldNames } from './field-names.ts';
import { operation, parseBody } from './operation.ts';
import {
  nestedSessionFields,
  restMessageSchema,
  restSessionInclude,
  restSessionSchema,
  restStreamFrameSchema,
  restToolCallSchema,
  sessionNames,
  toRestMessage,
  toRestToolCall,
  toRestSession,
} from './session-shapes.ts';
import { streamEvents } from './session-stream.ts';

/** Sessions, prompts and reactions answer `{message}` (403 when not yours), as in the original. */
export const sessionErrors: RestErrorStyle = { bodyKey: 'message', fieldName: sessionNames.toRest };
/** The original's session routes beyond the spec answer `{error}`; parley's own clients read `{message}`: both. */
export const sessionExtraErrors: RestErrorStyle = { bodyKey: 'both', fieldName: sessionNames.toRest };
/** Session delete answers `{error, message}`, and 401 when the caller may not delete. */
const deleteErrors: RestErrorStyle = { bodyKey: 'both', status: { FORBIDDEN: 401 } };
/** Renaming is the owner's, and the original refused others with 401 `{error}`. */
const renameErrors: RestErrorStyle = { bodyKey: 'error', status: { FORBIDDEN: 401 } };

/** Lists page with `?limit` and `?cursor`; the domain calls them `first` and `after`. */
export const listNames = fieldNames({ first: 'limit', after: 'cursor' });
/** A list's query: `?limit` (20 unless told) and `?cursor`. */
export const listQuery = listNames.schema(pageSchema);
/** The list of sessions shared with the caller answers `{error}`, as in the original. */
const sharedListErrors: RestErrorStyle = { bodyKey: 'error', fieldName: listNames.toRest };
/** The page of `GET /v2/sessions` as the original took it: `page`, `limit`, `agent_id` (an agent's key). */
const numberedNames = fieldNames({ agentKey: 'agent_id' });
/** A session's messages page with `?limit` and `?before` / `?after`. */
const messageNames = fieldNames({ first: 'limit', last: 'limit' }).toRest;

/** `PATCH /v2/sessions/{id}`: the original's rename (1 to 100 characters) and its autonomy settings. */
const titleSchema = z.string().trim().min(1, 'Title not provided').max(100, 'must be at most 100 characters');
const renameBodySchema = z.object({ title: titleSchema });
const patchBodySchema = z.object({
  title: titleSchema.optional(),
  autonomy_settings: sessionNames.schema(autonomySettingsSchema).optional(),
  while_replying: whileReplyingSchema.optional().meta({ description: "The session's default for prompts sent while an agent replies" }),
});
/** `POST /v2/sessions/{id}/cancel`: parley's `prompt_id`, or the original's tool call fields (which stop the whole reply). */
const cancelBodySchema = z.object({
  prompt_id: z.string({ error: 'must be a message id' }).optional(),
  tool_call_id: z.string().optional(),
  tool_call_index: z.number().int().min(0).optional(),
});

/** Where a cursor list goes on. */
export const nextCursor = z.string().nullable().meta({ description: 'Pass as `cursor` for the next page; null on the last one' });

/** The title of a rename, refused in the original's words when missing or empty. */
function titleOf(body: unknown): string {
  const parsed = renameBodySchema.safeParse(body ?? {});
  if (parsed.success) return parsed.data.title;
  const issue = parsed.error.issues[0]!;
  throw issue.code === 'invalid_type' || issue.code === 'too_small' ? badInput('Title not provided') : badInput(issue.message, ['title']);
}

/** A JSON object body, the only kind a session's settings come in. */
function objectBody(body: unknown): Record<string, unknown> {
  const value = body ?? {};
  if (typeof value !== 'object' || Array.isArray(value)) throw badInput('The request body must be a JSON object');
  return value as Record<string, unknown>;
}

/** Sessions, their messages and replies: the spec's send, react and delete, and the original's routes around them. */
export const sessionOperations = [
  operation({
    operationId: 'listMySessions',
    method: 'get',
    path: '/v2/sessions',
    tag: 'Sessions',
    summary:
      'A numbered page (`docs`...) of the sessions you own or were added to, and a cursor page (`sessions`) of those you own; latest activity first',
    query: listQuery.extend({
      page: numberedPageSchema.shape.page,
      agent_id: z
        .string()
        .optional()
        .meta({ description: "Only sessions with this agent (its key); unknown: 404 {message:'Agent not found'}" }),
    }),
    ok: {
      json: restSearchPageSchema.extend({ docs: z.array(restSessionSchema), sessions: z.array(restSessionSchema), nextCursor }),
    },
    errors: {
      style: { ...sessionErrors, fieldName: (n) => numberedNames.toRest(listNames.toRest(n)) },
      codes: ['BAD_USER_INPUT', 'NOT_FOUND'],
    },
    handler: async (request, _reply, { services }) => {
      const { limit, cursor, page, agent_id } = request.query;
      const numbered = await services.sessions.pageOf(
        request.viewer,
        numberedNames.toDomain(Object.fromEntries(Object.entries({ page, limit, agent_id }).filter(([, v]) => v !== undefined))),
        { include: restSessionInclude },
      );
      const { sessions, nextCursor } = await services.sessions.listMine(
        request.viewer,
        { first: limit, after: cursor },
        { include: restSessionInclude },
      );
      return {
        ...paginate(numbered.sessions.map(toRestSession), numbered.total, numbered.page, numbered.limit, numbered.cut),
        sessions: sessions.map(toRestSession),
        nextCursor,
      };
    },
  }),
  operation({
    operationId: 'createSession',
    method: 'post',
    path: '/v2/sessions/create',
    tag: 'Sessions',
    summary: 'Start a session without a message (agent_ids required)',
    body: sessionNames.schema(sendMessageSchema).omit({ session_id: true, content: true, attachments: true }),
    ok: { json: z.object({ success: z.boolean(), session: restSessionSchema }) },
    created: true,
    errors: { style: sessionErrors, codes: ['BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const { content: _c, attachments: _a, session_id: _s, stream: _st, ...settings } = objectBody(request.body);
      if (!Array.isArray(settings.agent_ids) || settings.agent_ids.length === 0) throw badInput(AGENT_IDS_REQUIRED);
      const started = await services.sessions.send(request.viewer, sessionNames.toDomain(settings, nestedSessionFields));
      const session = await services.sessions.get(request.viewer, started.sessionId, { include: restSessionInclude });
      return { success: true, session: toRestSession(session) };
    },
  }),
  operation({
    operationId: 'sendMessage',
    method: 'post',
    path: '/v2/sessions',
    tag: 'Sessions',
    summary: 'Send a message to a session, or start one with it; with `stream: true`, watch the replies',
    body: sessionNames.schema(sendMessageSchema).extend({
      stream: z.boolean().optional().meta({ description: 'Answer with the event stream of this prompt instead of its session id' }),
    }),
    ok: {
      json: z.object({
        session_id: z.string(),
        message_id: z.string().nullable().meta({ description: 'The saved message (null when only settings were sent)' }),
      }),
      events: restStreamFrameSchema,
    },
    errors: { style: sessionErrors, codes: ['BAD_USER_INPUT', 'FORBIDDEN', 'NOT_FOUND', 'CONFLICT'] },
    handler: async (request, reply, { services, stream }) => {
      const body = objectBody(request.body);
      if (body.stream !== undefined && typeof body.stream !== 'boolean') throw badInput('must be true or false', ['stream']);
      const input = sessionNames.toDomain(body, nestedSessionFields);
      if (!body.stream) {
        const started = await services.sessions.send(request.viewer, input);
        // The spec's `{session_id}`, and the saved prompt's id as the original answered it (null when none was sent).
        return { session_id: started.sessionId, message_id: started.promptId };
      }
      const { events } = await services.sessions.sendAndWatch(request.viewer, input);
      await streamEvents(reply, events, stream);
      return reply;
    },
  }),
  operation({
    operationId: 'reactToMessage',
    method: 'post',
    path: '/v2/sessions/react',
    tag: 'Sessions',
    summary: 'React to a message (the same reaction again takes it back)',
    body: sessionNames.schema(reactionSchema),
    ok: { json: z.object({ success: z.boolean(), message: z.string() }) },
    errors: { style: sessionErrors, codes: ['BAD_USER_INPUT', 'FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      const { added } = await services.sessions.react(request.viewer, sessionNames.toDomain(request.body ?? {}));
      return { success: true, message: added ? 'Reaction added' : 'Reaction removed' };
    },
  }),
  operation({
    operationId: 'getSession',
    method: 'get',
    path: '/v2/sessions/:session_id',
    tag: 'Sessions',
    summary: 'A session and a page of its messages (the latest, or around a cursor)',
    query: z.object({
      limit: z.coerce.number().int().min(0).max(MAX_MESSAGE_PAGE).default(DEFAULT_MESSAGE_PAGE),
      before: z.string().optional().meta({ description: 'olderCursor of a page: the messages before it (the default is the latest)' }),
      after: z.string().optional().meta({ description: 'newerCursor of a page: the messages after it' }),
    }),
    ok: {
      json: z.object({
        session: restSessionSchema.extend({ messages: z.array(restMessageSchema).meta({ description: 'The same page as messages' }) }),
        messages: z.array(restMessageSchema),
        page: z.object({
          hasOlder: z.boolean(),
          hasNewer: z.boolean(),
          olderCursor: z.string().nullable(),
          newerCursor: z.string().nullable(),
        }),
      }),
    },
    errors: { style: { ...sessionErrors, fieldName: messageNames }, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services, stream }) => {
      const { limit, before, after } = request.query;
      const count = limit === undefined ? null : Number(limit);
      const { session, page } = await services.sessions.withMessages(
        request.viewer,
        request.params.session_id,
        { include: restSessionInclude },
        after ? { first: count, after } : { last: count, before },
      );
      const first = page.messages[0];
      const last = page.messages.at(-1);
      const known = await stream.senders.lookup(page.messages.map((m) => m.senderId));
      const messages = page.messages.map((m) => toRestMessage(m, known, services.links));
      return {
        // The original's `{session}` carries its messages; parley's page of them and the cursors are beside it.
        session: { ...toRestSession(session), messages },
        messages,
        page: {
          hasOlder: page.hasPreviousPage,
          hasNewer: page.hasNextPage,
          olderCursor: first ? page.cursor(first) : null,
          newerCursor: last ? page.cursor(last) : null,
        },
      };
    },
  }),
  operation({
    operationId: 'updateSession',
    method: 'patch',
    path: '/v2/sessions/:session_id',
    tag: 'Sessions',
    summary:
      'Rename a session you own, or set its autonomy (auto_reply needs a budget; false stops the loop) or what prompts do while an agent replies',
    body: patchBodySchema,
    ok: { json: z.object({ success: z.boolean() }) },
    errors: { style: renameErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const body = objectBody(request.body);
      // The original's rename needs a title; a body that sets other settings may leave it out.
      const title =
        body.title === undefined && (body.autonomy_settings !== undefined || body.while_replying !== undefined) ? undefined : titleOf(body);
      const existing = await services.sessions.permissionIn(request.viewer, request.params.session_id);
      if (existing === null) throw notFound(SESSION_NOT_FOUND);
      if (existing !== 'owner')
        throw forbidden(title === undefined ? 'You are not allowed to change this session' : 'You are not allowed to rename this session');
      const { autonomySettings } = sessionNames.toDomain({ autonomy_settings: body.autonomy_settings }, nestedSessionFields) as {
        autonomySettings?: unknown;
      };
      await services.sessions.update(request.viewer, request.params.session_id, {
        title,
        autonomySettings,
        whileReplying: body.while_replying,
      });
      return { success: true };
    },
  }),
  operation({
    operationId: 'deleteSession',
    method: 'delete',
    path: '/v2/sessions/:session_id',
    tag: 'Sessions',
    summary: 'Delete a session you own, with its messages',
    ok: { json: z.object({ success: z.boolean() }) },
    errors: { style: deleteErrors, codes: ['FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      await services.sessions.delete(request.viewer, request.params.session_id);
      return { success: true };
    },
  }),
  operation({
    operationId: 'watchSession',
    method: 'get',
    path: '/v2/sessions/:session_id/events',
    tag: 'Sessions',
    summary: 'Everything that happens in a session, live; resumable with Last-Event-ID',
    query: resumeQuery,
    headers: resumeHeaders,
    ok: { events: restStreamFrameSchema },
    errors: { style: sessionErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, reply, { services, stream }) => {
      const after = resumePoint(request.headers['last-event-id'], request.query.after);
      const events = await services.sessions.watch(request.viewer, request.params.session_id, { after });
      await streamEvents(reply, events, stream);
      return reply;
    },
  }),
  operation({
    operationId: 'cancelReplies',
    method: 'post',
    path: '/v2/sessions/:session_id/cancel',
    tag: 'Sessions',
    summary: 'Stop the replies being written (to one prompt, or all); their running tools are refunded',
    body: cancelBodySchema,
    ok: {
      json: z.object({
        status: z.literal('cancel_signal_sent'),
        session_id: z.string(),
        success: z.boolean(),
        cancelled: z.number().int().meta({ description: 'Prompts whose replies were stopped' }),
      }),
    },
    errors: { style: sessionExtraErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const { prompt_id: promptId } = parseBody(cancelBodySchema, request.body);
      const sessionId = request.params.session_id;
      const cancelled = await services.sessions.cancel(request.viewer, sessionId, promptId);
      return { status: 'cancel_signal_sent' as const, session_id: sessionId, success: true, cancelled };
    },
  }),
  operation({
    operationId: 'settleToolApproval',
    method: 'post',
    path: '/v2/sessions/:session_id/approvals/:call_id',
    tag: 'Sessions',
    summary: "Approve or deny a tool call that waits for its payer's yes; the reply goes on (docs/sessions.md)",
    body: settleApprovalSchema,
    ok: { json: z.object({ success: z.boolean(), tool_call: restToolCallSchema }) },
    errors: { style: sessionExtraErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT', 'CONFLICT'] },
    handler: async (request, _reply, { services }) => {
      const { session_id: sessionId, call_id: callId } = request.params;
      const saved = await services.approvals.settle(request.viewer, sessionId, callId, request.body ?? {});
      return { success: true, tool_call: toRestToolCall(saved, services.links) };
    },
  }),
  operation({
    operationId: 'listSharedSessions',
    method: 'get',
    path: '/v2/sessions/shared',
    tag: 'Sessions - Permissions',
    summary: 'Sessions shared with you',
    // Shared sessions page by 100 unless told otherwise (the original's default).
    query: listQuery.extend({ limit: (listQuery.shape.limit as z.ZodDefault<z.ZodNumber>).removeDefault().default(100) }),
    ok: { json: z.object({ sharedSessions: z.array(restSessionSchema), nextCursor }) },
    errors: { style: sharedListErrors, codes: ['BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const page = { first: request.query.limit ?? 100, after: request.query.cursor };
      const { sessions, nextCursor } = await services.sessions.listShared(request.viewer, page, { include: restSessionInclude });
      return { sharedSessions: sessions.map(toRestSession), nextCursor };
    },
  }),
];
