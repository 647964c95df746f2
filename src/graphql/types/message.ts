import type { MessageView, ReactionsView, ReactionTotal, ToolCallView } from '../../domain/core/events.ts';
import { reactionCounts } from '../../domain/core/views.ts';
import { builder } from '../builder.ts';
import { loadersOf, maybeViewer, viewerOf } from '../context.ts';
import { Agent, readableAgent } from './agent.ts';
import { Creator } from './creator.ts';
import { MessageRoleEnum, MessageStatusEnum, ToolApprovalStateEnum, ToolCallStatusEnum } from './enums.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

export const ToolCall = builder.objectRef<ToolCallView>('ToolCall').implement({
  description: 'A tool an agent ran while writing a message.',
  fields: (t) => ({
    id: t.exposeID('id'),
    tool: t.exposeString('tool'),
    args: t.expose('args', { type: 'JSON' }),
    status: t.expose('status', { type: ToolCallStatusEnum }),
    result: t.field({ type: 'JSON', nullable: true, resolve: (c, _, ctx) => ctx.services.links.absoluteIn(c.result) }),
    cost: t.exposeFloat('cost', { nullable: true, description: 'Manna charged for the call; while AWAITING_APPROVAL, its price.' }),
    error: t.exposeString('error', { nullable: true }),
    approval: t.expose('approval', {
      type: ToolApprovalStateEnum,
      nullable: true,
      description: "For a call that needed its payer's yes: where that stands; null when none was needed.",
    }),
  }),
});

interface ReactionCount {
  reaction: string;
  count: number;
  reactedByMe: boolean;
}
export const ReactionCountRef = builder.objectRef<ReactionCount>('ReactionCount').implement({
  fields: (t) => ({ reaction: t.exposeString('reaction'), count: t.exposeInt('count'), reactedByMe: t.exposeBoolean('reactedByMe') }),
});

export const ReactionTotalRef = builder.objectRef<ReactionTotal>('ReactionTotal').implement({
  description: 'How many users gave one reaction.',
  fields: (t) => ({ reaction: t.exposeString('reaction'), count: t.exposeInt('count') }),
});

/** Totals per reaction, and whether the caller is among them; who else reacted is not shown. */
export const reactionsFor = (reactions: ReactionsView, viewerId: string | undefined): ReactionCount[] =>
  reactionCounts(reactions).map((r) => ({ ...r, reactedByMe: Boolean(viewerId && reactions[viewerId]?.includes(r.reaction)) }));

const Usage = builder.objectRef<Pick<MessageView, 'promptTokens' | 'completionTokens'>>('TokenUsage').implement({
  description: "The model provider's token count for the calls that wrote a message.",
  fields: (t) => ({ promptTokens: t.exposeInt('promptTokens'), completionTokens: t.exposeInt('completionTokens') }),
});

export const Message = builder.objectRef<MessageView>('Message').implement({
  interfaces: nodeInterfaces,
  description: 'One message of a session: from a user, an agent, or the session itself (role EDEN).',
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Message', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    role: t.expose('role', { type: MessageRoleEnum }),
    status: t.expose('status', {
      type: MessageStatusEnum,
      description: 'STREAMING while an agent is writing it; FAILED keeps the text written before the failure.',
    }),
    content: t.exposeString('content'),
    attachments: t.exposeStringList('attachments'),
    thought: t.exposeString('thought', { nullable: true, description: 'Reasoning the model showed, when thinking was asked for.' }),
    error: t.exposeString('error', { nullable: true, description: 'Why the reply failed.' }),
    promptId: t.globalID({
      nullable: true,
      description: 'For a reply: the user message it answers.',
      resolve: (m) => (m.promptId ? { type: 'Message', id: m.promptId } : null),
    }),
    sender: t.field({
      type: Creator,
      nullable: true,
      resolve: (m, _, ctx) => (m.senderId ? loadersOf(ctx).creatorById.load(m.senderId) : null),
    }),
    agent: t.field({
      type: Agent,
      nullable: true,
      description: 'For a reply: the agent that wrote it (null if you may no longer see it).',
      resolve: async (m, _, ctx) =>
        m.role === 'assistant' && m.senderId ? readableAgent(ctx, await loadersOf(ctx).agentById.load(m.senderId)) : null,
    }),
    toolCalls: t.field({ type: [ToolCall], resolve: (m) => m.toolCalls }),
    reactions: t.field({ type: [ReactionCountRef], resolve: (m, _, ctx) => reactionsFor(m.reactions, maybeViewer(ctx)?.id) }),
    usage: t.field({ type: Usage, resolve: (m) => m }),
    createdAt: t.field({ type: 'DateTime', resolve: (m) => new Date(m.createdAt) }),
  }),
});

const ReactionResult = builder.objectRef<{ added: boolean; messageId: string; reactions: ReactionsView }>('ReactionResult').implement({
  fields: (t) => ({
    added: t.exposeBoolean('added', { description: 'False when the reaction was there already and this removed it.' }),
    messageId: t.globalID({ resolve: (e) => ({ type: 'Message', id: e.messageId }) }),
    reactions: t.field({ type: [ReactionCountRef], resolve: (r, _, ctx) => reactionsFor(r.reactions, viewerOf(ctx).id) }),
  }),
});

builder.mutationField('reactToMessage', (t) =>
  t.field({
    type: ReactionResult,
    description: 'Toggles your reaction on a message; thumbs_up and thumbs_down replace each other.',
    args: {
      messageId: t.arg.id({ required: true }),
      reaction: t.arg.string({ required: true, description: 'An emoji or a name such as thumbs_up.' }),
    },
    resolve: (_root, { messageId, reaction }, ctx) =>
      ctx.services.sessions.react(viewerOf(ctx), { messageId: String(messageId), reaction }),
  }),
);
