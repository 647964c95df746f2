import { queryFromInfo } from '@pothos/plugin-prisma';
import type { GraphQLResolveInfo } from 'graphql';
import { badInput } from '../../domain/core/errors.ts';
import { BUDGET_LIMITS, type MessagePage, MAX_REPLY_INTERVAL_S } from '../../domain/sessions/index.ts';
import type { Session as SessionRow } from '../../generated/prisma/client.ts';
import type { ActorSelection } from '../../domain/core/vocabulary.ts';
import { builder } from '../builder.ts';
import { toConnection } from '../connection.ts';
import { viewerOf, type GraphQLContext } from '../context.ts';
import { Agent, readableAgent } from './agent.ts';
import { ActorSelectionEnum, SessionPermissionEnum, SessionStatusEnum, WhileReplyingEnum } from './enums.ts';
import { Message } from './message.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

const AutonomySettings = builder
  .objectRef<{ autoReply: boolean; replyInterval: number; actorSelectionMethod: ActorSelection }>('AutonomySettings')
  .implement({
    description: 'Whether the agents take turns on their own, how long they wait between turns, and who speaks next.',
    fields: (t) => ({
      autoReply: t.exposeBoolean('autoReply', { description: 'Turns false when the loop stops (a budget spent, turned off).' }),
      replyInterval: t.exposeInt('replyInterval', {
        description: `Seconds between a reply and the next turn (0–${MAX_REPLY_INTERVAL_S}).`,
      }),
      actorSelectionMethod: t.expose('actorSelectionMethod', { type: ActorSelectionEnum }),
    }),
  });

const SessionBudget = builder.objectRef<{ manna: number | null; tokens: number | null; turns: number | null }>('SessionBudget').implement({
  description: 'Limits on what the session may spend (null: no limit), or what it has spent.',
  fields: (t) => ({
    manna: t.exposeFloat('manna', { nullable: true }),
    tokens: t.exposeInt('tokens', { nullable: true }),
    turns: t.exposeInt('turns', { nullable: true, description: 'Model calls.' }),
  }),
});

builder.prismaObject('SessionUser', {
  name: 'SessionMember',
  description: 'A user taking part in a session, and what they may do there.',
  fields: (t) => ({
    user: t.relation('user'),
    permission: t.expose('permission', {
      type: SessionPermissionEnum,
      description: 'EDITOR may post and react; OWNER may also share, delete and manage users.',
    }),
    addedAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

export const Session = builder.prismaObject('Session', {
  interfaces: nodeInterfaces,
  description: 'A conversation between users and agents.',
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Session', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    title: t.exposeString('title', { nullable: true }),
    scenario: t.exposeString('scenario', { nullable: true }),
    status: t.expose('status', { type: SessionStatusEnum }),
    owner: t.relation('owner'),
    agents: t.field({
      type: [Agent],
      description: 'The agents of the session, in order (those you may see).',
      select: (_args, _ctx, nested) => ({ agents: { orderBy: { position: 'asc' }, select: { agent: nested(true) } } }),
      resolve: (s, _args, ctx) => s.agents.map((a) => readableAgent(ctx, a.agent)).filter((a) => a !== null),
    }),
    users: t.relation('users', { query: { orderBy: { createdAt: 'asc' } } }),
    myPermission: t.field({
      type: SessionPermissionEnum,
      nullable: true,
      select: (_args, ctx) => ({ ownerId: true, users: { where: { userId: viewerOf(ctx).id }, select: { permission: true } } }),
      resolve: (s, _args, ctx) => (s.ownerId === viewerOf(ctx).id ? 'owner' : (s.users[0]?.permission ?? null)),
    }),
    budget: t.field({
      type: SessionBudget,
      description: `Limits set when the session was made: manna ${BUDGET_LIMITS.mannaBudget.min}–${BUDGET_LIMITS.mannaBudget.max}, tokens ${BUDGET_LIMITS.tokenBudget.min}–${BUDGET_LIMITS.tokenBudget.max}, turns ${BUDGET_LIMITS.turnBudget.min}–${BUDGET_LIMITS.turnBudget.max}.`,
      resolve: (s) => ({ manna: s.mannaBudget?.toNumber() ?? null, tokens: s.tokenBudget, turns: s.turnBudget }),
    }),
    spent: t.field({
      type: SessionBudget,
      resolve: (s) => ({ manna: s.mannaSpent.toNumber(), tokens: s.tokensSpent, turns: s.turnsSpent }),
    }),
    autonomySettings: t.field({
      type: AutonomySettings,
      nullable: true,
      description: 'Null until set (see sendMessage and updateSession).',
      resolve: (s) =>
        s.autoReply === null || s.replyInterval === null || s.actorSelection === null
          ? null
          : { autoReply: s.autoReply, replyInterval: s.replyInterval, actorSelectionMethod: s.actorSelection },
    }),
    whileReplying: t.expose('whileReplying', {
      type: WhileReplyingEnum,
      description: 'What a message that does not say does while an agent of the session is still replying.',
    }),
    messages: t.connection({
      type: Message,
      description: 'Oldest first. Page forwards with first/after, backwards with last/before; with neither, the latest 50.',
      resolve: async (s, args, ctx) => messageConnection(await ctx.services.sessions.messages(viewerOf(ctx), s.id, args)),
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime', description: 'The last activity: a message, a reply, a change.' }),
  }),
});

function messageConnection(page: MessagePage) {
  return toConnection(page.messages, page.cursor, page);
}

/** A page of sessions as a connection, loading what the selection under `edges.node` needs. */
async function sessionConnection(
  list: (
    page: { first?: number | null; after?: string | null },
    query: object,
  ) => Promise<{ sessions: SessionRow[]; nextCursor: string | null; cursor(s: SessionRow): string }>,
  args: { first?: number | null; after?: string | null; last?: number | null; before?: string | null },
  ctx: GraphQLContext,
  info: GraphQLResolveInfo,
) {
  if (args.last != null || args.before != null)
    throw badInput('Sessions page forwards only: use first and after', [args.last != null ? 'last' : 'before']);
  const { sessions, nextCursor, cursor } = await list(
    { first: args.first, after: args.after },
    queryFromInfo({ context: ctx, info, path: ['edges', 'node'] }),
  );
  return toConnection(sessions, cursor, { hasNextPage: nextCursor !== null, hasPreviousPage: Boolean(args.after) });
}

builder.queryFields((t) => ({
  session: t.prismaField({
    type: 'Session',
    description: 'A session you own or take part in.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, { id }, ctx) => ctx.services.sessions.get(viewerOf(ctx), String(id), query),
  }),
  sessions: t.connection({
    type: Session,
    description: 'Your sessions, newest activity first (forward paging only: first/after).',
    resolve: (_root, args, ctx, info) =>
      sessionConnection((page, query) => ctx.services.sessions.listMine(viewerOf(ctx), page, query), args, ctx, info),
  }),
  sharedSessions: t.connection({
    type: Session,
    description: 'Sessions other users added you to, newest activity first (forward paging only).',
    resolve: (_root, args, ctx, info) =>
      sessionConnection((page, query) => ctx.services.sessions.listShared(viewerOf(ctx), page, query), args, ctx, info),
  }),
}));

const SessionBudgetInput = builder.inputType('SessionBudgetInput', {
  fields: (t) => ({ mannaBudget: t.float(), tokenBudget: t.int(), turnBudget: t.int() }),
});
const AutonomySettingsInput = builder.inputType('AutonomySettingsInput', {
  description: "All three together. autoReply needs a budget (the session's, or one set with it); false stops the loop.",
  fields: (t) => ({
    autoReply: t.boolean({ required: true }),
    replyInterval: t.int({ required: true, description: `Seconds, 0–${MAX_REPLY_INTERVAL_S}.` }),
    actorSelectionMethod: t.field({ type: ActorSelectionEnum, required: true }),
  }),
});
const SendExtrasInput = builder.inputType('SendExtrasInput', {
  fields: (t) => ({ excludeMemory: t.boolean({ description: "Keep this exchange out of the agents' memory of you." }) }),
});

/** Checks (lengths, budgets, agents) happen once, in the domain's zod schema. */
export const SendMessageInput = builder.inputType('SendMessageInput', {
  description: 'A message to a session; without sessionId, a new session with agentIds and this first message.',
  fields: (t) => ({
    sessionId: t.id(),
    content: t.string(),
    attachments: t.stringList(),
    thinking: t.boolean({ description: "Ask the agents to show their reasoning (kept as the reply's thought)." }),
    agentIds: t.idList({ description: 'New session: its agents. Existing session: the agents that should answer.' }),
    scenario: t.string(),
    budget: t.field({ type: SessionBudgetInput }),
    title: t.string(),
    extras: t.field({ type: SendExtrasInput }),
    autonomySettings: t.field({ type: AutonomySettingsInput, description: 'Agents that take turns on their own (owners only).' }),
    whileReplying: t.field({
      type: WhileReplyingEnum,
      description:
        "What this message does if an agent of the session is still replying (the session's whileReplying when left out); on a new session, its default too.",
    }),
  }),
});

const UpdateSessionInput = builder.inputType('UpdateSessionInput', {
  description: 'What to change (owners only); what is left out stays as it is.',
  fields: (t) => ({
    title: t.string(),
    scenario: t.string(),
    budget: t.field({ type: SessionBudgetInput, description: 'What the session may spend in all (what it has spent counts).' }),
    autonomySettings: t.field({ type: AutonomySettingsInput }),
    whileReplying: t.field({
      type: WhileReplyingEnum,
      description: 'What a message that does not say does while an agent is still replying.',
    }),
  }),
});

const SendMessageResult = builder
  .objectRef<{ sessionId: string; promptId: string | null; replyIds: string[]; seq: number | null }>('SendMessageResult')
  .implement({
    fields: (t) => ({
      session: t.prismaField({
        type: 'Session',
        resolve: (query, r, _args, ctx) => ctx.services.sessions.get(viewerOf(ctx), r.sessionId, query),
      }),
      promptId: t.globalID({
        nullable: true,
        description: 'Your saved message (null when none was sent).',
        resolve: (r) => (r.promptId ? { type: 'Message', id: r.promptId } : null),
      }),
      replyIds: t.globalIDList({
        description: 'The replies being written, one per answering agent.',
        resolve: (r) => r.replyIds.map((id) => ({ type: 'Message', id })),
      }),
      seq: t.expose('seq', { type: 'Seq', nullable: true, description: 'Watch sessionEvents with after: seq - 1 to see the whole reply.' }),
    }),
  });

builder.mutationFields((t) => ({
  sendMessage: t.field({
    type: SendMessageResult,
    description: 'Sends a message and returns at once; the replies are written in the background (watch sessionEvents).',
    args: { input: t.arg({ type: SendMessageInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const started = await ctx.services.sessions.send(viewerOf(ctx), input);
      return {
        sessionId: started.sessionId,
        promptId: started.promptId,
        replyIds: started.replies.map((r) => r.messageId),
        seq: started.startSeq,
      };
    },
  }),
  updateSession: t.prismaField({
    type: 'Session',
    description:
      'Changes a session you own: its title, scenario or autonomy (autoReply false stops the loop, with an AutonomyStopped event).',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateSessionInput, required: true }) },
    resolve: async (query, _root, { id, input }, ctx) => {
      const viewer = viewerOf(ctx);
      const changes = {
        title: input.title ?? undefined,
        scenario: input.scenario ?? undefined,
        budget: input.budget ?? undefined,
        autonomySettings: input.autonomySettings ?? undefined,
        whileReplying: input.whileReplying ?? undefined,
      };
      if (Object.values(changes).every((v) => v === undefined)) throw badInput('Nothing to change', ['input']);
      await ctx.services.sessions.update(viewer, String(id), changes);
      return ctx.services.sessions.get(viewer, String(id), query);
    },
  }),
  cancelReplies: t.int({
    description:
      'Stops the replies being written in a session (to one prompt, or all); returns how many prompts were stopped. Their running tools are cancelled and refunded. Stopping all also turns auto-reply off.',
    args: { sessionId: t.arg.id({ required: true }), promptId: t.arg.id() },
    resolve: (_root, { sessionId, promptId }, ctx) =>
      ctx.services.sessions.cancel(viewerOf(ctx), String(sessionId), promptId == null ? undefined : String(promptId)),
  }),
  deleteSession: t.boolean({
    description: 'Deletes a session with its messages and shares, for good (owners only). Watchers are told.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => {
      await ctx.services.sessions.delete(viewerOf(ctx), String(id));
      return true;
    },
  }),
  addSessionUser: t.prismaField({
    type: 'Session',
    description: 'Adds a user to a session (or changes their permission); owners only.',
    args: {
      sessionId: t.arg.id({ required: true }),
      username: t.arg.string({ required: true }),
      permission: t.arg({ type: SessionPermissionEnum, required: true }),
    },
    resolve: async (query, _root, { sessionId, username, permission }, ctx) => {
      const viewer = viewerOf(ctx);
      await ctx.services.sessions.addUser(viewer, String(sessionId), { username, permission });
      return ctx.services.sessions.get(viewer, String(sessionId), query);
    },
  }),
  removeSessionUser: t.boolean({
    description: 'Removes a user from a session (owners), or leaves it (your own id). Their live subscriptions end.',
    args: { sessionId: t.arg.id({ required: true }), userId: t.arg.id({ required: true }) },
    resolve: async (_root, { sessionId, userId }, ctx) => {
      await ctx.services.sessions.removeUser(viewerOf(ctx), String(sessionId), String(userId));
      return true;
    },
  }),
}));
