import type { AttemptView } from '../../domain/webhooks/index.ts';
import { builder } from '../builder.ts';

export const WebhookAttempt = builder.objectRef<AttemptView>('WebhookAttempt').implement({
  description: 'One try of a delivery, as the log keeps it.',
  fields: (t) => ({
    attempt: t.exposeInt('attempt', { description: '1 for the first try of the delivery.' }),
    at: t.expose('at', { type: 'DateTime' }),
    statusCode: t.exposeInt('statusCode', { nullable: true }),
    durationMs: t.exposeInt('durationMs'),
    response: t.exposeString('answer', { nullable: true, description: 'The first bytes (at most 4 KB) of the answer.' }),
    error: t.exposeString('error', { nullable: true, description: 'Why there was no answer.' }),
    nextAttemptAt: t.expose('nextAttemptAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When the next try was due after this one; null after the last.',
    }),
  }),
});
