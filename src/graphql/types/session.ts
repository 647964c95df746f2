import { builder } from '../builder.ts';
import { SessionStatusEnum } from './enums.ts';

export const Session = builder.prismaObject('Session', {
  description: 'A conversation between users and agents.',
  fields: (t) => ({
    id: t.exposeID('id'),
    title: t.exposeString('title', { nullable: true }),
    scenario: t.exposeString('scenario', { nullable: true }),
    status: t.expose('status', { type: SessionStatusEnum }),
    owner: t.relation('owner'),
    messages: t.relatedConnection('messages', { cursor: 'id', query: { orderBy: { id: 'asc' } } }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});
