import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';

builder.mutationField('deleteApiKey', (t) =>
  t.boolean({
    description: 'Deletes one of your API keys for good (it may be the one in use); it fails at once.',
    args: { apiKey: t.arg.string({ required: true }) },
    resolve: async (_root, { apiKey }, ctx) => {
      await ctx.services.apiKeys.delete(viewerOf(ctx), apiKey);
      return true;
    },
  }),
);
