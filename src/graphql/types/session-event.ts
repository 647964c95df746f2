import type { SessionEventOf, SessionEvent as SessionEventView, SessionEventType } from '../../domain/core/events.ts';
import type { WatchItem } from '../../domain/core/watch.ts';
import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';
import { deliver } from '../watch-results.ts';
import { AutonomyStopReasonEnum, SessionPermissionEnum } from './enums.ts';
import { Message, ReactionCountRef, ReactionTotalRef, ToolCall } from './message.ts';
import { SendMessageInput } from './session.ts';

type Of<T extends SessionEventType> = SessionEventOf<T>;

export const SessionEvent = builder.interfaceRef<SessionEventView>('SessionEvent').implement({
  description: 'Something that happened in a session. `seq` grows with every event of the session: resume with after: seq.',
  // Named from the event's own type: every streamed token would otherwise be tried against each
  // event type in turn.
  resolveType: (e) => eventTypes[e.type].name,
  fields: (t) => ({
    seq: t.expose('seq', { type: 'Seq' }),
    sessionId: t.globalID({ resolve: (e) => ({ type: 'Session', id: e.sessionId }) }),
    type: t.exposeString('type', { description: 'The event type as REST streams name it (assistant_token, ...).' }),
    at: t.field({ type: 'DateTime', resolve: (e) => new Date(e.at) }),
  }),
});

type ObjectFields<T> = NonNullable<Parameters<ReturnType<typeof builder.objectRef<T>>['implement']>[0]['fields']>;
interface EventTypeSpec<T extends SessionEventType> {
  name: string;
  description: string;
  fields: ObjectFields<Of<T>>;
}

/**
 * Each event type as a GraphQL type implementing SessionEvent, told apart by its `type`. Keyed by
 * every type the domain defines: an event without its GraphQL type does not compile.
 */
const eventTypes: { [T in SessionEventType]: EventTypeSpec<T> } = {
  start_prompt: {
    name: 'PromptStarted',
    description: 'A user message arrived; replyIds are the replies that will answer it.',
    fields: (t) => ({
      promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }),
      message: t.field({ type: Message, resolve: (e) => e.message }),
      agentIds: t.globalIDList({ resolve: (e) => e.agentIds.map((id) => ({ type: 'Agent', id })) }),
      replyIds: t.globalIDList({ resolve: (e) => e.replyIds.map((id) => ({ type: 'Message', id })) }),
    }),
  },
  assistant_token: {
    name: 'AssistantToken',
    description: 'A piece of a reply being written.',
    fields: (t) => ({
      promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }),
      messageId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.messageId }) }),
      agentId: t.globalID({ resolve: (e) => ({ type: 'Agent', id: e.agentId }) }),
      text: t.exposeString('text'),
    }),
  },
  assistant_thinking: {
    name: 'AssistantThinking',
    description: 'A piece of the reasoning behind a reply (when thinking was asked for).',
    fields: (t) => ({
      promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }),
      messageId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.messageId }) }),
      agentId: t.globalID({ resolve: (e) => ({ type: 'Agent', id: e.agentId }) }),
      text: t.exposeString('text'),
    }),
  },
  assistant_message: {
    name: 'AssistantMessage',
    description: 'A reply finished and saved.',
    fields: (t) => ({
      promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }),
      agentId: t.globalID({ resolve: (e) => ({ type: 'Agent', id: e.agentId }) }),
      message: t.field({ type: Message, resolve: (e) => e.message }),
    }),
  },
  tool_progress: {
    name: 'ToolProgress',
    description: 'A tool call of a reply under way says how far it is (not saved: only watchers see it).',
    fields: (t) => ({
      promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }),
      messageId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.messageId }) }),
      agentId: t.globalID({ resolve: (e) => ({ type: 'Agent', id: e.agentId }) }),
      toolCallId: t.exposeID('toolCallId', { description: 'The ToolCall.id it will settle as.' }),
      tool: t.exposeString('tool'),
      progress: t.exposeFloat('progress', { nullable: true, description: 'From 0 to 1; null when the tool gives no total.' }),
      message: t.string({ nullable: true, description: 'What it is doing.', resolve: (e) => e.detail }),
    }),
  },
  tool_complete: {
    name: 'ToolCompleted',
    description: 'A tool call of a reply finished (or failed).',
    fields: (t) => ({
      promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }),
      messageId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.messageId }) }),
      agentId: t.globalID({ resolve: (e) => ({ type: 'Agent', id: e.agentId }) }),
      toolCall: t.field({ type: ToolCall, resolve: (e) => e.toolCall }),
    }),
  },
  tool_cancelled: {
    name: 'ToolCancelled',
    description: 'A tool call of a reply was cancelled.',
    fields: (t) => ({
      promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }),
      messageId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.messageId }) }),
      agentId: t.globalID({ resolve: (e) => ({ type: 'Agent', id: e.agentId }) }),
      toolCall: t.field({ type: ToolCall, resolve: (e) => e.toolCall }),
    }),
  },
  tool_approval_requested: {
    name: 'ToolApprovalRequested',
    description:
      "A reply paused at a tool call that waits for its payer's yes (settleToolApproval); toolCall has its arguments and its price as cost.",
    fields: (t) => ({
      promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }),
      messageId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.messageId }) }),
      agentId: t.globalID({ resolve: (e) => ({ type: 'Agent', id: e.agentId }) }),
      toolCall: t.field({ type: ToolCall, resolve: (e) => e.toolCall }),
      expiresAt: t.field({ type: 'DateTime', description: 'When it counts as denied, unanswered.', resolve: (e) => new Date(e.expiresAt) }),
    }),
  },
  tool_approval_settled: {
    name: 'ToolApprovalSettled',
    description:
      'A tool call that waited was answered (toolCall.approval: APPROVED, DENIED, or EXPIRED at its timeout), on whichever surface; an approved call runs when its reply goes on.',
    fields: (t) => ({
      promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }),
      messageId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.messageId }) }),
      agentId: t.globalID({ resolve: (e) => ({ type: 'Agent', id: e.agentId }) }),
      toolCall: t.field({ type: ToolCall, resolve: (e) => e.toolCall }),
    }),
  },
  error: {
    name: 'ReplyFailed',
    description: 'A reply broke off; message is the saved reply (status FAILED) with what was written.',
    fields: (t) => ({
      promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }),
      agentId: t.globalID({ resolve: (e) => ({ type: 'Agent', id: e.agentId }) }),
      error: t.exposeString('error'),
      message: t.field({ type: Message, resolve: (e) => e.message }),
    }),
  },
  end_prompt: {
    name: 'PromptEnded',
    description: 'Every reply to a prompt (or to an autonomous turn) has finished or failed.',
    fields: (t) => ({ promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }) }),
  },
  reply_removed: {
    name: 'ReplyRemoved',
    description: 'A reply was rolled back by a newer prompt (whileReplying: ROLLBACK): it is gone, its running tools refunded.',
    fields: (t) => ({
      promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }),
      messageId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.messageId }) }),
      agentId: t.globalID({ resolve: (e) => ({ type: 'Agent', id: e.agentId }) }),
    }),
  },
  autonomous_turn: {
    name: 'AutonomousTurnStarted',
    description: "An agent of an autonomous session takes its turn, with no user message; promptId is the turn's reply (replyId) itself.",
    fields: (t) => ({
      promptId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.promptId }) }),
      agentId: t.globalID({ resolve: (e) => ({ type: 'Agent', id: e.agentId }) }),
      replyId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.replyId }) }),
    }),
  },
  autonomy_stopped: {
    name: 'AutonomyStopped',
    description: 'An autonomous session stopped taking turns (auto-reply is now off), and why.',
    fields: (t) => ({
      reason: t.expose('reason', { type: AutonomyStopReasonEnum }),
      detail: t.exposeString('detail'),
    }),
  },
  reaction: {
    name: 'ReactionsChanged',
    description: 'Someone reacted to a message.',
    fields: (t) => ({
      messageId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.messageId }) }),
      userId: t.globalID({ description: 'The user whose reactions changed.', resolve: (e) => ({ type: 'Creator', id: e.userId }) }),
      userReactions: t.exposeStringList('userReactions', { description: 'Their reactions on the message now.' }),
      counts: t.field({ type: [ReactionTotalRef], description: "The message's totals per reaction.", resolve: (e) => e.counts }),
      reactions: t.field({
        type: [ReactionCountRef],
        description: 'The totals with whether you gave each, as Message.reactions shows them.',
        deprecationReason: 'Use counts and userReactions (this one reads your reactions for each event).',
        resolve: async (e, _args, ctx) => {
          const viewer = viewerOf(ctx);
          const mine = viewer.id === e.userId ? e.userReactions : await ctx.services.sessions.myReactions(viewer, e.messageId);
          return e.counts.map((c) => ({ ...c, reactedByMe: mine.includes(c.reaction) }));
        },
      }),
    }),
  },
  session_updated: {
    name: 'SessionUpdated',
    description: 'The title or scenario changed.',
    fields: (t) => ({
      title: t.exposeString('title', { nullable: true }),
      scenario: t.exposeString('scenario', { nullable: true }),
    }),
  },
  user_added: {
    name: 'SessionUserAdded',
    description: 'A user was added to the session or given another permission.',
    fields: (t) => ({
      userId: t.globalID({ resolve: (e) => ({ type: 'Creator', id: e.userId }) }),
      permission: t.expose('permission', { type: SessionPermissionEnum }),
    }),
  },
  user_removed: {
    name: 'SessionUserRemoved',
    description: 'A user left or was removed.',
    fields: (t) => ({ userId: t.globalID({ resolve: (e) => ({ type: 'Creator', id: e.userId }) }) }),
  },
  session_deleted: { name: 'SessionDeleted', description: 'The session was deleted; nothing follows.', fields: () => ({}) },
};

function eventType<T extends SessionEventType>(type: T, { name, description, fields }: EventTypeSpec<T>) {
  builder.objectRef<Of<T>>(name).implement({
    description,
    interfaces: [SessionEvent],
    isTypeOf: (e) => (e as SessionEventView).type === type,
    fields,
  });
}
for (const type of Object.keys(eventTypes) as SessionEventType[]) eventType(type, eventTypes[type] as EventTypeSpec<typeof type>);

const nothing = (): AsyncIterableIterator<WatchItem> => ({
  next: async () => ({ value: undefined, done: true }),
  return: async () => ({ value: undefined, done: true }),
  [Symbol.asyncIterator]() {
    return this;
  },
});

builder.subscriptionFields((t) => ({
  sessionEvents: t.field({
    type: SessionEvent,
    description:
      'Everything that happens in a session you take part in, live. With after, first every event after that seq (a reconnecting client misses nothing).',
    args: { sessionId: t.arg.id({ required: true }), after: t.arg({ type: 'Seq' }) },
    subscribe: (_root, { sessionId, after }, ctx) =>
      ctx.services.sessions.watch(viewerOf(ctx), String(sessionId), { after: after ?? undefined }),
    resolve: deliver as never,
  }),
  sendMessage: t.field({
    type: SessionEvent,
    description: 'Sends a message and streams its replies, from PromptStarted to PromptEnded.',
    args: { input: t.arg({ type: SendMessageInput, required: true }) },
    subscribe: async (_root, { input }, ctx) => (await ctx.services.sessions.sendAndWatch(viewerOf(ctx), input)).events ?? nothing(),
    resolve: deliver as never,
  }),
}));
