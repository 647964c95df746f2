import { z } from 'zod';
import type { Session } from '../generated/prisma/client.ts';
import {
  ActorSelection,
  MessageRole,
  MessageStatus,
  SessionPermission,
  SessionStatus,
  TaskStatus,
  ToolApprovalState,
  WhileReplying,
} from '../domain/core/vocabulary.ts';
import {
  autonomyStopReasons,
  type MessageView,
  type SessionEvent,
  type SessionEventOf,
  type SessionEventType,
  type ToolCallView,
} from '../domain/core/events.ts';
import type { MediaLinks } from '../domain/core/media-links.ts';
import type { SharedSession } from '../domain/shares/index.ts';
import { type CreatorRow, restCreatorRefSchema, toRestCreatorRef } from './creators.ts';
import { doneFrameSchema, endFrameSchema } from './event-stream.ts';
import { fieldNames } from './field-names.ts';
import type { SenderLookup } from './senders.ts';

/** REST request bodies of sessions use the original's snake_case names. */
export const sessionNames = fieldNames({
  sessionId: 'session_id',
  agentIds: 'agent_ids',
  mannaBudget: 'manna_budget',
  tokenBudget: 'token_budget',
  turnBudget: 'turn_budget',
  excludeMemory: 'exclude_memory',
  messageId: 'message_id',
  autonomySettings: 'autonomy_settings',
  autoReply: 'auto_reply',
  replyInterval: 'reply_interval',
  actorSelectionMethod: 'actor_selection_method',
  whileReplying: 'while_replying',
});
/** The REST fields of a session body whose contents are renamed too. */
export const nestedSessionFields = ['budget', 'extras', 'autonomy_settings'] as const;

type PersonRow = CreatorRow;
export type RestSessionRow = Session & {
  owner: PersonRow;
  agents: { agentId: string; agent: { name: string; description: string; user: PersonRow } }[];
  users: { userId: string; permission: SessionPermission; user: PersonRow }[];
};
const personSelect = { id: true, username: true, userImage: true, type: true, createdAt: true, updatedAt: true } as const;
/** Owner, agents and users are populated, as the original's clients read them. */
export const restSessionInclude = {
  owner: { select: personSelect },
  agents: {
    orderBy: { position: 'asc' as const },
    select: { agentId: true, agent: { select: { name: true, description: true, user: { select: personSelect } } } },
  },
  users: { orderBy: { createdAt: 'asc' as const }, select: { userId: true, permission: true, user: { select: personSelect } } },
};

const restSessionAgentSchema = restCreatorRefSchema.extend({ name: z.string(), description: z.string() });

export const restSessionSchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    title: z.string().nullable(),
    scenario: z.string().nullable(),
    status: z.enum(SessionStatus),
    owner: restCreatorRefSchema,
    agents: z.array(restSessionAgentSchema).meta({ description: 'The agents, in the order they answer' }),
    agent_ids: z.array(z.string()).meta({ description: 'Agent ids, in the order they answer' }),
    users: z.array(restCreatorRefSchema.extend({ user: z.string(), permission: z.enum(SessionPermission) })),
    budget: z.object({
      manna_budget: z.number().nullable(),
      token_budget: z.number().int().nullable(),
      turn_budget: z.number().int().nullable(),
      manna_spent: z.number(),
      tokens_spent: z.number().int(),
      turns_spent: z.number().int(),
    }),
    spent: z.object({ manna: z.number(), tokens: z.number().int(), turns: z.number().int() }),
    autonomy_settings: z
      .object({ auto_reply: z.boolean(), reply_interval: z.number().int(), actor_selection_method: z.enum(ActorSelection) })
      .nullable()
      .meta({ description: 'Null until set; auto_reply turns false when the loop stops (a budget spent, cancel)' }),
    while_replying: z
      .enum(WhileReplying)
      .meta({ description: 'What a prompt that does not say does while an agent is still replying (docs/sessions.md)' }),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'Session' });

export const restToolCallSchema = z
  .object({
    id: z.string(),
    tool: z.string(),
    args: z.unknown(),
    status: z.enum(TaskStatus),
    result: z.unknown(),
    cost: z.number().nullable().meta({ description: 'Manna charged; while awaiting_approval, its price' }),
    error: z.string().nullable(),
    approval: z
      .enum(ToolApprovalState)
      .nullable()
      .meta({ description: "For a call that needed its payer's yes: requested, approved, denied or expired; null otherwise" }),
  })
  .meta({ id: 'ToolCall' });

export const restMessageSchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    session: z.string(),
    role: z.enum(MessageRole),
    sender: restCreatorRefSchema.nullable().meta({ description: 'The user or agent who wrote it, populated as the original did' }),
    sender_id: z.string().nullable().meta({ description: 'The user or agent id' }),
    prompt_id: z.string().nullable().meta({ description: 'For a reply: the message it answers' }),
    status: z.enum(MessageStatus),
    content: z.string(),
    attachments: z.array(z.string()),
    thought: z.string().nullable(),
    error: z.string().nullable(),
    tool_calls: z.array(restToolCallSchema),
    reactions: z.record(z.string(), z.array(z.string())).meta({ description: 'User id to the reactions that user gave' }),
    usage: z.object({ prompt_tokens: z.number().int(), completion_tokens: z.number().int() }),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'Message' });

const sharedAgentSchema = z.object({ key: z.string(), name: z.string(), image: z.string().nullable() });
const sharedPersonSchema = z.object({ username: z.string(), userImage: z.string().nullable() });

export const restShareSchema = z
  .object({
    share_id: z.string(),
    title: z.string(),
    session: z.object({
      _id: z.string(),
      id: z.string(),
      title: z.string().nullable(),
      createdAt: z.date(),
      agents: z.array(sharedAgentSchema),
    }),
    messages: z.array(
      z.object({
        _id: z.string(),
        id: z.string(),
        role: z.string(),
        content: z.string(),
        attachments: z.array(z.string()),
        sender: z.object({ username: z.string(), userImage: z.string().nullable(), type: z.enum(['user', 'agent']) }).nullable(),
        reactions: z.array(z.object({ reaction: z.string(), count: z.number().int() })),
        createdAt: z.date(),
      }),
    ),
    owner: sharedPersonSchema,
    createdAt: z.date(),
  })
  .meta({ id: 'Share' });

export const toRestSession = (s: RestSessionRow): z.input<typeof restSessionSchema> => ({
  _id: s.id,
  id: s.id,
  title: s.title,
  scenario: s.scenario,
  status: s.status,
  owner: toRestCreatorRef(s.owner),
  agents: s.agents.map((a) => ({ ...toRestCreatorRef(a.agent.user), name: a.agent.name, description: a.agent.description })),
  agent_ids: s.agents.map((a) => a.agentId),
  users: s.users.map((u) => ({ ...toRestCreatorRef(u.user), user: u.userId, permission: u.permission })),
  budget: {
    manna_budget: s.mannaBudget?.toNumber() ?? null,
    token_budget: s.tokenBudget,
    turn_budget: s.turnBudget,
    manna_spent: s.mannaSpent.toNumber(),
    tokens_spent: s.tokensSpent,
    turns_spent: s.turnsSpent,
  },
  spent: { manna: s.mannaSpent.toNumber(), tokens: s.tokensSpent, turns: s.turnsSpent },
  autonomy_settings:
    s.autoReply === null || s.replyInterval === null || s.actorSelection === null
      ? null
      : { auto_reply: s.autoReply, reply_interval: s.replyInterval, actor_selection_method: s.actorSelection },
  while_replying: s.whileReplying,
  createdAt: s.createdAt,
  updatedAt: s.updatedAt,
});

/** A tool call as REST shows it, the links in its result absolute. */
export const toRestToolCall = (c: ToolCallView, links: MediaLinks): z.input<typeof restToolCallSchema> => ({
  id: c.id,
  tool: c.tool,
  args: c.args,
  status: c.status,
  result: links.absoluteIn(c.result),
  cost: c.cost,
  error: c.error,
  approval: c.approval,
});

/** A message as REST shows it; `senders` holds its sender's row (see `senders.ts`). */
export const toRestMessage = (m: MessageView, senders: SenderLookup, links: MediaLinks): z.input<typeof restMessageSchema> => ({
  _id: m.id,
  id: m.id,
  session: m.sessionId,
  role: m.role,
  sender: m.senderId && senders.has(m.senderId) ? toRestCreatorRef(senders.get(m.senderId)!) : null,
  sender_id: m.senderId,
  prompt_id: m.promptId,
  status: m.status,
  content: m.content,
  attachments: m.attachments,
  thought: m.thought,
  error: m.error,
  tool_calls: m.toolCalls.map((c) => toRestToolCall(c, links)),
  reactions: m.reactions,
  usage: { prompt_tokens: m.promptTokens, completion_tokens: m.completionTokens },
  createdAt: m.createdAt,
});

export const toRestShare = (s: SharedSession): z.input<typeof restShareSchema> => ({
  share_id: s.shareId,
  title: s.title,
  session: { _id: s.session.id, ...s.session },
  messages: s.messages.map((m) => ({ _id: m.id, ...m })),
  owner: s.owner,
  createdAt: s.createdAt,
});

const inSession = { session_id: z.string() };
const ofPrompt = { ...inSession, prompt_id: z.string() };

type RestEvent<T extends SessionEventType> = {
  schema: z.ZodObject<{ type: z.ZodLiteral<T> } & z.ZodRawShape>;
  toData(e: SessionEventOf<T>, senders: SenderLookup, links: MediaLinks): object;
};

/** One event type on REST streams: its frame's schema, and how an event becomes that frame's data. */
function restEvent<T extends SessionEventType, S extends z.ZodRawShape>(
  type: T,
  shape: S,
  toData: (e: NoInfer<SessionEventOf<T>>, senders: SenderLookup, links: MediaLinks) => z.input<z.ZodObject<S>>,
): RestEvent<T> {
  return {
    schema: z.object({ type: z.literal(type), ...shape }),
    toData: (e, senders, links) => ({ type, ...toData(e, senders, links) }),
  };
}

const streamedText = <T extends 'assistant_token' | 'assistant_thinking'>(type: T) =>
  restEvent(
    type,
    { ...ofPrompt, message_id: z.string(), agent: z.string(), text: z.string() },
    (e: SessionEventOf<'assistant_token' | 'assistant_thinking'>) => ({
      session_id: e.sessionId,
      prompt_id: e.promptId,
      message_id: e.messageId,
      agent: e.agentId,
      text: e.text,
    }),
  );
const settledToolCall = <T extends 'tool_complete' | 'tool_cancelled' | 'tool_approval_settled'>(type: T) =>
  restEvent(
    type,
    { ...ofPrompt, message_id: z.string(), agent: z.string(), tool_call: restToolCallSchema },
    (e: SessionEventOf<'tool_complete' | 'tool_cancelled' | 'tool_approval_settled'>, _senders, links) => ({
      session_id: e.sessionId,
      prompt_id: e.promptId,
      message_id: e.messageId,
      agent: e.agentId,
      tool_call: toRestToolCall(e.toolCall, links),
    }),
  );

/**
 * What each event of a session says on REST streams, by `type`: the original's frame, with the
 * session id and, where a message was saved, the message with its id. Keyed by every type the
 * domain defines: an event without its REST frame does not compile.
 */
const restEvents: { [T in SessionEventType]: RestEvent<T> } = {
  start_prompt: restEvent(
    'start_prompt',
    { ...ofPrompt, message: restMessageSchema, agent_ids: z.array(z.string()), reply_ids: z.array(z.string()) },
    (e, senders, links) => ({
      session_id: e.sessionId,
      prompt_id: e.promptId,
      message: toRestMessage(e.message, senders, links),
      agent_ids: e.agentIds,
      reply_ids: e.replyIds,
    }),
  ),
  assistant_token: streamedText('assistant_token'),
  assistant_thinking: streamedText('assistant_thinking'),
  assistant_message: restEvent(
    'assistant_message',
    { ...ofPrompt, agent: z.string(), content: z.string(), message: restMessageSchema, tool_calls: z.array(restToolCallSchema) },
    (e, senders, links) => ({
      session_id: e.sessionId,
      prompt_id: e.promptId,
      agent: e.agentId,
      content: e.message.content,
      message: toRestMessage(e.message, senders, links),
      tool_calls: e.message.toolCalls.map((c) => toRestToolCall(c, links)),
    }),
  ),
  tool_progress: restEvent(
    'tool_progress',
    {
      ...ofPrompt,
      message_id: z.string(),
      agent: z.string(),
      tool_call_id: z.string(),
      tool: z.string(),
      progress: z.number().nullable().meta({ description: 'From 0 to 1; null when the tool gives no total' }),
      message: z.string().nullable(),
    },
    (e) => ({
      session_id: e.sessionId,
      prompt_id: e.promptId,
      message_id: e.messageId,
      agent: e.agentId,
      tool_call_id: e.toolCallId,
      tool: e.tool,
      progress: e.progress,
      message: e.detail,
    }),
  ),
  tool_complete: settledToolCall('tool_complete'),
  tool_cancelled: settledToolCall('tool_cancelled'),
  tool_approval_settled: settledToolCall('tool_approval_settled'),
  tool_approval_requested: restEvent(
    'tool_approval_requested',
    {
      ...ofPrompt,
      message_id: z.string(),
      agent: z.string(),
      tool_call: restToolCallSchema,
      expires_at: z.string().meta({ description: 'When it counts as denied, unanswered (ISO 8601)' }),
    },
    (e, _senders, links) => ({
      session_id: e.sessionId,
      prompt_id: e.promptId,
      message_id: e.messageId,
      agent: e.agentId,
      tool_call: toRestToolCall(e.toolCall, links),
      expires_at: e.expiresAt,
    }),
  ),
  error: restEvent('error', { ...ofPrompt, agent: z.string(), error: z.string(), message: restMessageSchema }, (e, senders, links) => ({
    session_id: e.sessionId,
    prompt_id: e.promptId,
    agent: e.agentId,
    error: e.error,
    message: toRestMessage(e.message, senders, links),
  })),
  end_prompt: restEvent('end_prompt', ofPrompt, (e) => ({ session_id: e.sessionId, prompt_id: e.promptId })),
  reply_removed: restEvent(
    'reply_removed',
    { ...ofPrompt, agent: z.string(), message_id: z.string().meta({ description: 'The reply rolled back by a newer prompt: it is gone' }) },
    (e) => ({ session_id: e.sessionId, prompt_id: e.promptId, agent: e.agentId, message_id: e.messageId }),
  ),
  autonomous_turn: restEvent(
    'autonomous_turn',
    {
      ...ofPrompt,
      agent: z.string(),
      reply_id: z.string().meta({ description: "The turn's reply; prompt_id is its id too (a turn answers no message)" }),
    },
    (e) => ({ session_id: e.sessionId, prompt_id: e.promptId, agent: e.agentId, reply_id: e.replyId }),
  ),
  autonomy_stopped: restEvent('autonomy_stopped', { ...inSession, reason: z.enum(autonomyStopReasons), detail: z.string() }, (e) => ({
    session_id: e.sessionId,
    reason: e.reason,
    detail: e.detail,
  })),
  reaction: restEvent(
    'reaction',
    {
      ...inSession,
      message_id: z.string(),
      user: z.string().meta({ description: 'The user whose reactions changed' }),
      reactions: z
        .record(z.string(), z.array(z.string()))
        .meta({ description: "That user's reactions now, keyed by their id (merge it into the message's map)" }),
      counts: z.array(z.object({ reaction: z.string(), count: z.number().int() })),
    },
    (e) => ({
      session_id: e.sessionId,
      message_id: e.messageId,
      user: e.userId,
      reactions: { [e.userId]: e.userReactions },
      counts: e.counts,
    }),
  ),
  session_updated: restEvent('session_updated', { ...inSession, title: z.string().nullable(), scenario: z.string().nullable() }, (e) => ({
    session_id: e.sessionId,
    title: e.title,
    scenario: e.scenario,
  })),
  user_added: restEvent('user_added', { ...inSession, user: z.string(), permission: z.enum(SessionPermission) }, (e) => ({
    session_id: e.sessionId,
    user: e.userId,
    permission: e.permission,
  })),
  user_removed: restEvent('user_removed', { ...inSession, user: z.string() }, (e) => ({ session_id: e.sessionId, user: e.userId })),
  session_deleted: restEvent('session_deleted', inSession, (e) => ({ session_id: e.sessionId })),
};

const [firstEvent, ...otherEvents] = Object.values(restEvents).map((r) => r.schema);
const restEventSchema = z.discriminatedUnion('type', [firstEvent!, ...otherEvents]);

export const restUpdateFrameSchema = z.object({ event: z.literal('update'), data: restEventSchema }).meta({ id: 'SessionUpdateFrame' });
const restEndFrameSchema = endFrameSchema('SessionStreamEndFrame');
const restDoneFrameSchema = doneFrameSchema('SessionStreamDoneFrame');
/** The JSON on each `data:` line of a session's event stream. */
export const restStreamFrameSchema = z
  .union([restUpdateFrameSchema, restEndFrameSchema, restDoneFrameSchema])
  .meta({ id: 'SessionStreamFrame' });

/** One event as the original's stream frame: `{"event":"update","data":{"type":...}}`, its media links absolute. */
export function toRestFrame<T extends SessionEventType>(
  e: SessionEventOf<T>,
  senders: SenderLookup,
  links: MediaLinks,
): z.input<typeof restUpdateFrameSchema> {
  return { event: 'update', data: (restEvents[e.type] as RestEvent<T>).toData(e, senders, links) as z.input<typeof restEventSchema> };
}

/** The sender a frame of this event shows (its message's), to look up before it is written. */
export const senderOfFrame = (e: SessionEvent): string | null => ('message' in e ? e.message.senderId : null);
