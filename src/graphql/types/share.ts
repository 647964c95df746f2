import { builder } from '../builder.ts';

export const Share = builder.prismaObject('Share', {
  description: 'A session frozen up to a message, readable by anyone with its id.',
  fields: (t) => ({
    id: t.exposeID('id'),
    title: t.exposeString('title'),
    owner: t.relation('owner'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});
