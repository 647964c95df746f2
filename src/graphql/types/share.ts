import type { SharedPerson, SharedSession as SharedSessionView } from '../../domain/shares/index.ts';
import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';
import { nodeInterfaces } from './node.ts';
import { CreatorTypeEnum, MessageRoleEnum } from './enums.ts';

type SharedMessageView = SharedSessionView['messages'][number];
type SharedAgentView = SharedSessionView['session']['agents'][number];

const SharedPersonRef = builder.objectRef<SharedPerson>('SharedPerson').implement({
  description: 'Someone as a share shows them: a name and a picture.',
  fields: (t) => ({
    username: t.exposeString('username'),
    userImage: t.exposeString('userImage', { nullable: true }),
    type: t.expose('type', { type: CreatorTypeEnum }),
  }),
});

const SharedAgent = builder.objectRef<SharedAgentView>('SharedAgent').implement({
  fields: (t) => ({ key: t.exposeString('key'), name: t.exposeString('name'), image: t.exposeString('image', { nullable: true }) }),
});

const SharedReaction = builder.objectRef<{ reaction: string; count: number }>('SharedReaction').implement({
  fields: (t) => ({ reaction: t.exposeString('reaction'), count: t.exposeInt('count') }),
});

const SharedMessage = builder.objectRef<SharedMessageView>('SharedMessage').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    role: t.field({ type: MessageRoleEnum, resolve: (m) => m.role as never }),
    content: t.exposeString('content'),
    attachments: t.exposeStringList('attachments'),
    sender: t.field({ type: SharedPersonRef, nullable: true, resolve: (m) => m.sender }),
    reactions: t.field({ type: [SharedReaction], resolve: (m) => m.reactions }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

export const Share = builder.objectRef<SharedSessionView>('Share').implement({
  description: 'A session frozen up to a message, readable by anyone with its id: no budgets, memory or user ids.',
  interfaces: nodeInterfaces,
  fields: (t) => ({
    id: t.globalID({ resolve: (s) => ({ type: 'Share', id: s.shareId }) }),
    shareId: t.exposeID('shareId'),
    title: t.exposeString('title'),
    owner: t.field({ type: SharedPersonRef, resolve: (s) => ({ ...s.owner, type: 'user' as const }) }),
    sessionId: t.globalID({ resolve: (s) => ({ type: 'Session', id: s.session.id }) }),
    agents: t.field({ type: [SharedAgent], resolve: (s) => s.session.agents }),
    messages: t.field({
      type: [SharedMessage],
      description: 'Up to the message the share was made at, oldest first.',
      resolve: (s) => s.messages,
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.queryField('share', (t) =>
  t.field({
    type: Share,
    description: 'A shared session by its share id. Public: no API key needed.',
    args: { shareId: t.arg.id({ required: true }) },
    resolve: (_root, { shareId }, ctx) => ctx.services.shares.read(String(shareId)),
  }),
);

builder.mutationField('shareSession', (t) =>
  t.field({
    type: Share,
    description: 'Freezes a session at its latest message into a public share (owners only).',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.services.shares.create(viewerOf(ctx), String(id)),
  }),
);
