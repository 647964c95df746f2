import { z } from 'zod';
import type { RestErrorStyle } from '../http/errors.ts';
import { operation, parseBody } from './operation.ts';
import { restShareSchema, toRestShare } from './session-shapes.ts';
import { sessionExtraErrors } from './sessions.ts';

/** The public share read answers `{error}`. */
const shareErrors: RestErrorStyle = { bodyKey: 'error' };

/** `POST /v2/sessions/{id}/share`: up to which message, and what to call it. */
const shareBodySchema = z.object({
  message_id: z.string().min(1).max(200).optional().meta({ description: 'The last message shared (default: the latest finished one)' }),
  title: z.string().trim().min(1).max(200).optional(),
});

/** Public shares of a session as it was, up to a message (the shares service, `domain/shares/`). */
export const shareOperations = [
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
];
