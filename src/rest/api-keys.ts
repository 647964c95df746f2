import { z } from 'zod';
import type { RestErrorStyle } from '../http/errors.ts';
import { operation } from './operation.ts';

/** Another user's or an unknown key is a 401 "API key not found", as in the original. */
const errors: RestErrorStyle = { bodyKey: 'message', status: { NOT_FOUND: 401 } };

export const apiKeyOperations = [
  operation({
    operationId: 'deleteApiKey',
    method: 'delete',
    path: '/apikeys',
    tag: 'API Keys',
    summary: 'Delete one of your API keys (for good, at once)',
    body: z.object({ apiKey: z.string() }),
    ok: { json: z.object({}).strict() },
    errors: { style: errors, codes: ['BAD_USER_INPUT', 'NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      const body = request.body;
      await services.apiKeys.delete(
        request.viewer,
        typeof body === 'object' && body !== null && 'apiKey' in body ? body.apiKey : undefined,
      );
      return {};
    },
  }),
];
