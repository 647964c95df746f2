import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { EventsConfig } from '../config.ts';
import { badInput, forbidden, notFound } from '../domain/core/errors.ts';
import { paginate } from '../domain/search/page.ts';
import { SESSION_NOT_FOUND } from '../domain/sessions/access.ts';
import { AGENT_IDS_REQUIRED } from '../domain/sessions/service.ts';
import type { Services } from '../domain/services.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { fieldNames } from './field-names.ts';
import { senderDirectory } from './senders.ts';
import { restSessionInclude, sessionNames, toRestMessage, toRestSession, toRestShare } from './session-shapes.ts';
import { streamEvents } from './session-stream.ts';

/** Sessions, prompts and reactions answer `{message}` (403 when not yours), as in the original. */
const errors: RestErrorStyle = { bodyKey: 'message', fieldName: sessionNames.toRest };
/** Session delete answers `{error, message}`, and 401 when the caller may not delete. */
const deleteErrors: RestErrorStyle = { bodyKey: 'both', status: { FORBIDDEN: 401 } };
/** The public share read and the shared list answer `{error}`. */
const shareErrors: RestErrorStyle = { bodyKey: 'error' };
/** Lists page with `?limit` and `?cursor`; the domain calls them `first` and `after`. */
const listNames = fieldNames({ first: 'limit', after: 'cursor' });
/** A session's messages page with `?limit` and `?before` / `?after`. */
const messageNames = fieldNames({ first: 'limit', last: 'limit' }).toRest;
/** The original's session routes beyond the spec answer `{error}`; parley's own clients read `{message}`: both. */
const bothErrors: RestErrorStyle = { bodyKey: 'both', fieldName: sessionNames.toRest };
/** Renaming is the owner's, and the original refused others with 401 `{error}`. */
const renameErrors: RestErrorStyle = { bodyKey: 'error', status: { FORBIDDEN: 401 } };
/** The page of `GET /v2/sessions` as the original took it: `page`, `limit`, `agent_id` (an agent's key). */
const numberedNames = fieldNames({ agentKey: 'agent_id' });
/** For the OpenAPI description. */
export {
  errors as sessionErrors,
  deleteErrors as sessionDeleteErrors,
  shareErrors,
  bothErrors as sessionExtraErrors,
  renameErrors as sessionRenameErrors,
  listNames,
};

/** `PATCH /v2/sessions/{id}`: the original's rename, 1 to 100 characters. */
export const renameBodySchema = z.object({
  title: z.string().trim().min(1, 'Title not provided').max(100, 'must be at most 100 characters'),
});
/** `POST /v2/sessions/{id}/share`: up to which message, and what to call it. */
export const shareBodySchema = z.object({
  message_id: z.string().min(1).max(200).optional().meta({ description: 'The last message shared (default: the latest finished one)' }),
  title: z.string().trim().min(1).max(200).optional(),
});
/** `POST /v2/sessions/{id}/cancel`: parley's `prompt_id`, or the original's tool call fields (which stop the whole reply). */
export const cancelBodySchema = z.object({
  prompt_id: z.string().optional(),
  tool_call_id: z.string().optional(),
  tool_call_index: z.number().int().min(0).optional(),
});

/** Reads a route's own body with its schema: a bad one is a 400 naming the field, and changes nothing. */
function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const result = schema.safeParse(body ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol');
  // The original's words for a rename without a usable title.
  if ((schema as z.ZodType) === renameBodySchema && (issue.code === 'invalid_type' || issue.code === 'too_small'))
    throw badInput('Title not provided');
  throw badInput(issue.message, path);
}

type SessionParams = { Params: { session_id: string } };

/** `Last-Event-ID` (or `?after=`): the seq of the last event the client received. */
function resumePoint(header: unknown, query: unknown): number | undefined {
  const raw = typeof header === 'string' && header !== '' ? header : typeof query === 'string' && query !== '' ? query : undefined;
  if (raw === undefined) return undefined;
  if (!/^\d{1,16}$/.test(raw) || !Number.isSafeInteger(Number(raw)))
    throw badInput('Last-Event-ID (or after) must be the id of an event from this stream');
  return Number(raw);
}

export function sessionRoutes(app: FastifyInstance, services: Services, events: EventsConfig) {
  const senders = senderDirectory(services.creators);
  const stream = { events, streams: services.metrics.streams, senders };

  app.get<{ Querystring: { limit?: string; cursor?: string } }>(
    '/v2/sessions/shared',
    { config: { errors: { ...shareErrors, fieldName: listNames.toRest } } },
    async (request) => {
      const page = { first: request.query.limit ?? 100, after: request.query.cursor };
      const { sessions, nextCursor } = await services.sessions.listShared(request.viewer, page, { include: restSessionInclude });
      return { sharedSessions: sessions.map(toRestSession), nextCursor };
    },
  );

  /**
   * The original's numbered page (`docs`, `total`, `page`...) of the sessions the caller owns or
   * was added to, and beside it parley's cursor list of the sessions the caller owns.
   */
  app.get<{ Querystring: { limit?: string; cursor?: string; page?: string; agent_id?: string } }>(
    '/v2/sessions',
    { config: { errors: { ...errors, fieldName: (n) => numberedNames.toRest(listNames.toRest(n)) } } },
    async (request) => {
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
        ...paginate(numbered.sessions.map(toRestSession), numbered.total, numbered.page, numbered.limit),
        sessions: sessions.map(toRestSession),
        nextCursor,
      };
    },
  );

  /** The original's way to start a session without a message: 201 `{success, session}`. */
  app.post<{ Body: Record<string, unknown> | undefined }>('/v2/sessions/create', { config: { errors } }, async (request, reply) => {
    const body = request.body ?? {};
    if (typeof body !== 'object' || Array.isArray(body)) throw badInput('The request body must be a JSON object');
    const { content: _c, attachments: _a, session_id: _s, stream: _st, ...settings } = body;
    if (!Array.isArray(settings.agent_ids) || settings.agent_ids.length === 0) throw badInput(AGENT_IDS_REQUIRED);
    const started = await services.sessions.send(request.viewer, sessionNames.toDomain(settings, ['budget', 'extras']));
    const session = await services.sessions.get(request.viewer, started.sessionId, { include: restSessionInclude });
    return reply.code(201).send({ success: true, session: toRestSession(session) });
  });

  app.post<{ Body: Record<string, unknown> | undefined }>('/v2/sessions', { config: { errors } }, async (request, reply) => {
    const body = request.body ?? {};
    if (typeof body !== 'object' || Array.isArray(body)) throw badInput('The request body must be a JSON object');
    if (body.stream !== undefined && typeof body.stream !== 'boolean') throw badInput('must be true or false', ['stream']);
    const input = sessionNames.toDomain(body, ['budget', 'extras']);
    if (!body.stream) {
      const started = await services.sessions.send(request.viewer, input);
      // The spec's `{session_id}`, and the saved prompt's id as the original answered it (null when none was sent).
      return { session_id: started.sessionId, message_id: started.promptId };
    }
    const { events } = await services.sessions.sendAndWatch(request.viewer, input);
    await streamEvents(reply, events, stream);
    return reply;
  });

  app.post('/v2/sessions/react', { config: { errors } }, async (request) => {
    const { added } = await services.sessions.react(request.viewer, sessionNames.toDomain(request.body ?? {}));
    return { success: true, message: added ? 'Reaction added' : 'Reaction removed' };
  });

  app.get<{ Params: { share_id: string } }>(
    '/v2/sessions/share/:share_id',
    { config: { public: true, errors: shareErrors } },
    async (request) => ({
      share: toRestShare(await services.shares.read(request.params.share_id)),
    }),
  );

  app.get<SessionParams & { Querystring: { limit?: string; before?: string; after?: string } }>(
    '/v2/sessions/:session_id',
    { config: { errors: { ...errors, fieldName: messageNames } } },
    async (request) => {
      const { viewer } = request;
      const { session_id: id } = request.params;
      const { limit, before, after } = request.query;
      const count = limit === undefined ? null : Number(limit);
      const { session, page } = await services.sessions.withMessages(
        viewer,
        id,
        { include: restSessionInclude },
        after ? { first: count, after } : { last: count, before },
      );
      const first = page.messages[0];
      const last = page.messages.at(-1);
      const known = await senders.lookup(page.messages.map((m) => m.senderId));
      const messages = page.messages.map((m) => toRestMessage(m, known));
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
  );

  app.patch<SessionParams>('/v2/sessions/:session_id', { config: { errors: renameErrors } }, async (request) => {
    const { title } = parseBody(renameBodySchema, request.body);
    const existing = await services.sessions.permissionIn(request.viewer, request.params.session_id);
    if (existing === null) throw notFound(SESSION_NOT_FOUND);
    if (existing !== 'owner') throw forbidden('You are not allowed to rename this session');
    await services.sessions.send(request.viewer, { sessionId: request.params.session_id, title });
    return { success: true };
  });

  app.delete<{ Params: { share_id: string } }>('/v2/sessions/share/:share_id', { config: { errors: shareErrors } }, async (request) => {
    await services.shares.delete(request.viewer, request.params.share_id);
    return { success: true };
  });

  app.get<SessionParams & { Querystring: { after?: string } }>(
    '/v2/sessions/:session_id/events',
    { config: { errors } },
    async (request, reply) => {
      const after = resumePoint(request.headers['last-event-id'], request.query.after);
      const events = await services.sessions.watch(request.viewer, request.params.session_id, { after });
      await streamEvents(reply, events, stream);
      return reply;
    },
  );

  app.delete<SessionParams>('/v2/sessions/:session_id', { config: { errors: deleteErrors } }, async (request) => {
    await services.sessions.delete(request.viewer, request.params.session_id);
    return { success: true };
  });

  app.post<SessionParams & { Body: { prompt_id?: unknown } | undefined }>(
    '/v2/sessions/:session_id/cancel',
    { config: { errors: bothErrors } },
    async (request) => {
      const promptId = request.body?.prompt_id;
      if (promptId !== undefined && typeof promptId !== 'string') throw badInput('must be a message id', ['prompt_id']);
      parseBody(cancelBodySchema, request.body);
      const sessionId = request.params.session_id;
      const cancelled = await services.sessions.cancel(request.viewer, sessionId, promptId);
      return { status: 'cancel_signal_sent', session_id: sessionId, success: true, cancelled };
    },
  );

  app.post<SessionParams>('/v2/sessions/:session_id/share', { config: { errors: bothErrors } }, async (request, reply) => {
    const body = parseBody(shareBodySchema, request.body);
    const share = await services.shares.create(request.viewer, request.params.session_id, {
      messageId: body.message_id,
      title: body.title,
    });
    // The original's answer, with the share as parley shows it beside.
    return reply.code(201).send({
      success: true,
      share_id: share.shareId,
      share_url: `/sessions/share/${share.shareId}`,
      share: toRestShare(share),
    });
  });

  app.post<SessionParams>('/v2/sessions/:session_id/users', { config: { errors } }, async (request) => {
    const added = await services.sessions.addUser(request.viewer, request.params.session_id, request.body ?? {});
    return { success: true, user: added.userId, permission: added.permission };
  });

  app.delete<{ Params: { session_id: string; user_id: string } }>(
    '/v2/sessions/:session_id/users/:user_id',
    { config: { errors } },
    async (request) => {
      await services.sessions.removeUser(request.viewer, request.params.session_id, request.params.user_id);
      return { success: true };
    },
  );
}
