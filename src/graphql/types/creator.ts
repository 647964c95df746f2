import { mannaNumber } from '../../domain/core/manna.ts';
import { balanceOf } from '../../domain/creators/index.ts';
import { newestFirst } from '../../domain/core/ordering.ts';
import { visibleCreations, visibleToFilter } from '../../domain/discovery/index.ts';
import type { User } from '../../generated/prisma/client.ts';
import { builder } from '../builder.ts';
import { maybeViewer, viewerOf, type GraphQLContext } from '../context.ts';
import { Agent, readableAgent } from './agent.ts';
import { CreatorTypeEnum } from './enums.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

const isSelf = (ctx: GraphQLContext, user: Pick<User, 'id'>) => maybeViewer(ctx)?.id === user.id;
/** Balances and account details are private to the creator. */
const ownOnly = <T>(ctx: GraphQLContext, user: User, value: (u: User) => T) => (isSelf(ctx, user) ? value(user) : null);

export const Creator = builder.prismaObject('User', {
  name: 'Creator',
  interfaces: nodeInterfaces,
  description: 'A user or an agent: anyone who can own things and take part in sessions.',
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Creator', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    username: t.exposeString('username'),
    userImage: t.exposeString('userImage', { nullable: true }),
    type: t.expose('type', { type: CreatorTypeEnum }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    balance: t.float({
      nullable: true,
      description: 'Spendable manna (subscription + forever); only on your own profile.',
      resolve: (u, _, ctx) => ownOnly(ctx, u, (x) => mannaNumber(balanceOf(x))),
    }),
    subscriptionBalance: t.float({ nullable: true, resolve: (u, _, ctx) => ownOnly(ctx, u, (x) => x.subscriptionBalance.toNumber()) }),
    foreverBalance: t.float({ nullable: true, resolve: (u, _, ctx) => ownOnly(ctx, u, (x) => x.foreverBalance.toNumber()) }),
    subscriptionTier: t.string({ nullable: true, resolve: (u, _, ctx) => ownOnly(ctx, u, (x) => x.subscriptionTier) }),
    featureFlags: t.stringList({ nullable: true, resolve: (u, _, ctx) => ownOnly(ctx, u, (x) => x.featureFlags) }),
    agentProfile: t.field({
      type: Agent,
      nullable: true,
      description: 'The agent behind this creator, when it is one (and you may see it).',
      select: (_args, _ctx, nested) => ({ agentProfile: nested(true) }),
      resolve: (user, _args, ctx) => readableAgent(ctx, user.agentProfile),
    }),
    agents: t.relatedConnection('ownedAgents', {
      cursor: 'id',
      description: 'Agents this creator owns: all of them on your own profile, public ones elsewhere.',
      query: (_args, ctx) => ({ where: visibleToFilter(viewerOf(ctx), 'ownerId'), orderBy: newestFirst }),
    }),
    creations: t.relatedConnection('creations', {
      cursor: 'id',
      description: 'Creations by this creator that you can see, newest first.',
      query: (_args, ctx) => ({ where: visibleCreations(viewerOf(ctx)), orderBy: newestFirst }),
    }),
  }),
});

builder.queryField('creator', (t) =>
  t.prismaField({
    type: 'User',
    description: 'A creator by id: a user, or an agent you may see. Balances show only on your own profile.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, { id }, ctx) => ctx.services.creators.get(viewerOf(ctx), String(id), query),
  }),
);

builder.queryField('me', (t) =>
  t.prismaField({
    type: 'User',
    description: 'The creator that owns the API key.',
    resolve: (query, _root, _args, ctx) => ctx.services.creators.me(viewerOf(ctx), query),
  }),
);
