import { builder } from '../builder.ts';
import { MessageRoleEnum } from './enums.ts';

export const Message = builder.prismaObject('Message', {
  fields: (t) => ({
    id: t.exposeID('id'),
    role: t.expose('role', { type: MessageRoleEnum }),
    content: t.exposeString('content'),
    attachments: t.exposeStringList('attachments'),
    thought: t.exposeString('thought', { nullable: true }),
    sender: t.relation('sender', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});
