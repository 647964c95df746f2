import type { FastifyInstance } from 'fastify';
import type { EventsConfig } from '../config.ts';
import { badInput } from '../domain/errors.ts';
import type { Services } from '../domain/services.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { fieldNames } from './field-names.ts';
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
/** For the OpenAPI description. */
export { errors as sessionErrors, deleteErrors as sessionDeleteErrors, shareErrors, listNames };

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
  const stream = { events, streams: services.metrics.streams };

  app.get<{ Querystring: { limit?: string; cursor?: string } }>(
    '/v2/sessions/shared',
    { config: { errors: { ...shareErrors, fieldName: listNames.toRest } } },
    async (request) => {
      const page = { first: request.query.limit ?? 100, after: request.query.cursor };
      const { sessions, nextCursor } = await services.sessions.listShared(request.viewer, page, { include: restSessionInclude });
      return { sharedSessions: sessions.map(toRestSession), nextCursor };
    },
  );

  app.get<{ Querystring: { limit?: string; cursor?: string } }>(
    '/v2/sessions',
    { config: { errors: { ...errors, fieldName: listNames.toRest } } },
    async (request) => {
      const page = { first: request.query.limit, after: request.query.cursor };
      const { sessions, nextCursor } = await services.sessions.listMine(request.viewer, page, { include: restSessionInclude });
      return { sessions: sessions.map(toRestSession), nextCursor };
    },
  );

  app.post<{ Body: Record<string, unknown> | undefined }>('/v2/sessions', { config: { errors } }, async (request, reply) => {
    const body = request.body ?? {};
    if (typeof body !== 'object' || Array.isArray(body)) throw badInput('The request body must be a JSON object');
    if (body.stream !== undefined && typeof body.stream !== 'boolean') throw badInput('must be true or false', ['stream']);
    const input = sessionNames.toDomain(body, ['budget', 'extras']);
    if (!body.stream) {
      const started = await services.sessions.send(request.viewer, input);
      return { session_id: started.sessionId };
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
      return {
        session: toRestSession(session),
        messages: page.messages.map(toRestMessage),
        page: {
          hasOlder: page.hasPreviousPage,
          hasNewer: page.hasNextPage,
          olderCursor: first ? page.cursor(first) : null,
          newerCursor: last ? page.cursor(last) : null,
        },
      };
    },
  );

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
    { config: { errors } },
    async (request) => {
      const promptId = request.body?.prompt_id;
      if (promptId !== undefined && typeof promptId !== 'string') throw badInput('must be a message id', ['prompt_id']);
      const cancelled = await services.sessions.cancel(request.viewer, request.params.session_id, promptId);
      return { success: true, cancelled };
    },
  );

  app.post<SessionParams>('/v2/sessions/:session_id/share', { config: { errors } }, async (request) => ({
    share: toRestShare(await services.shares.create(request.viewer, request.params.session_id)),
  }));

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
