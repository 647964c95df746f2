import { z } from 'zod';
import { sessionUserSchema } from '../domain/sessions/index.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { operation, parseBody } from './operation.ts';
import { restSessionInclude, restSessionSchema, restShareSchema, toRestSession, toRestShare } from './session-shapes.ts';
import { listNames, listQuery, nextCursor, sessionErrors, sessionExtraErrors } from './sessions.ts';

/** The public share read and the shared list answer `{error}`. */
const shareErrors: RestErrorStyle = { bodyKey: 'error' };

/** `POST /v2/sessions/{id}/share`: up to which message, and what to call it. */
const shareBodySchema = z.object({
  message_id: z.string().min(1).max(200).optional().meta({ description: 'The last message shared (default: the latest finished one)' }),
  title: z.string().trim().min(1).max(200).optional(),
});

/** Who else may see a session: the users let into it, and public shares of it as it was. */
export const sessionSharingOperations = [
  operation({
    operationId: 'listSharedSessions',
    method: 'get',
    path: '/v2/sessions/shared',
    tag: 'Sessions - Permissions',
    summary: 'Sessions shared with you',
    // Shared sessions page by 100 unless told otherwise (the original's default).
    query: listQuery.extend({ limit: (listQuery.shape.limit as z.ZodDefault<z.ZodNumber>).removeDefault().default(100) }),
    ok: { json: z.object({ sharedSessions: z.array(restSessionSchema), nextCursor }) },
    errors: { style: { ...shareErrors, fieldName: listNames.toRest }, codes: ['BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const page = { first: request.query.limit ?? 100, after: request.query.cursor };
      const { sessions, nextCursor } = await services.sessions.listShared(request.viewer, page, { include: restSessionInclude });
      return { sharedSessions: sessions.map(toRestSession), nextCursor };
    },
  }),
  operation({
    operationId: 'getSharedSession',
    method: 'get',
    path: '/v2/sessions/share/:share_id',
    tag: 'Sessions',
    summary: 'A publicly shared session, as it was when shared',
    public: true,
    ok: { json: z.object({ share: restShareSchema }) },
    errors: { style: shareErrors, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({ share: toRestShare(await services.shares.read(request.params.share_id)) }),
  }),
  operation({
    operationId: 'shareSession',
    method: 'post',
    path: '/v2/sessions/:session_id/share',
    tag: 'Sessions - Permissions',
    summary: 'Share a session you own publicly, up to a message (default: as it is now)',
    body: shareBodySchema,
    ok: { json: z.object({ success: z.boolean(), share_id: z.string(), share_url: z.string(), share: restShareSchema }) },
    created: true,
    errors: { style: sessionExtraErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const body = parseBody(shareBodySchema, request.body);
      const share = await services.shares.create(request.viewer, request.params.session_id, {
        messageId: body.message_id,
        title: body.title,
      });
      // The original's answer, with the share as parley shows it beside.
      return { success: true, share_id: share.shareId, share_url: `/sessions/share/${share.shareId}`, share: toRestShare(share) };
    },
  }),
  operation({
    operationId: 'deleteShare',
    method: 'delete',
    path: '/v2/sessions/share/:share_id',
    tag: 'Sessions - Permissions',
    summary: 'Take down a share you made',
    ok: { json: z.object({ success: z.boolean() }) },
    errors: { style: shareErrors, codes: ['FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      await services.shares.delete(request.viewer, request.params.share_id);
      return { success: true };
    },
  }),
  operation({
    operationId: 'addSessionUser',
    method: 'post',
    path: '/v2/sessions/:session_id/users',
    tag: 'Sessions - Permissions',
    summary: 'Let a user into a session you own, or change their permission',
    body: sessionUserSchema,
    ok: { json: z.object({ success: z.boolean(), user: z.string(), permission: sessionUserSchema.shape.permission }) },
    errors: { style: sessionErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const added = await services.sessions.addUser(request.viewer, request.params.session_id, request.body ?? {});
      return { success: true, user: added.userId, permission: added.permission };
    },
  }),
  operation({
    operationId: 'removeSessionUser',
    method: 'delete',
    path: '/v2/sessions/:session_id/users/:user_id',
    tag: 'Sessions - Permissions',
    summary: 'Remove a user from a session you own',
    ok: { json: z.object({ success: z.boolean() }) },
    errors: { style: sessionErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      await services.sessions.removeUser(request.viewer, request.params.session_id, request.params.user_id);
      return { success: true };
    },
  }),
];
