import { z } from 'zod';
import { sessionUserSchema } from '../domain/sessions/index.ts';
import { operation } from './operation.ts';
import { sessionErrors } from './sessions.ts';

/** Who else may use a session: the users its owners let into it, each with a permission. */
export const sessionUserOperations = [
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
