import { z } from 'zod';
import type { Session } from '../generated/prisma/client.ts';
import { MessageRole, MessageStatus, SessionPermission, SessionStatus, ToolCallStatus } from '../generated/prisma/enums.ts';
import type { MessageView, SessionEvent, ToolCallView } from '../domain/sessions/events.ts';
import type { WatchEnd } from '../domain/sessions/stream.ts';
import type { SharedSession } from '../domain/shares/service.ts';
import { fieldNames } from './field-names.ts';

/** REST request bodies of sessions use the original's snake_case names. */
export const sessionNames = fieldNames({
  sessionId: 'session_id',
  agentIds: 'agent_ids',
  mannaBudget: 'manna_budget',
  tokenBudget: 'token_budget',
  turnBudget: 'turn_budget',
  excludeMemory: 'exclude_memory',
  messageId: 'message_id',
});

export type RestSessionRow = Session & { agents: { agentId: string }[]; users: { userId: string; permission: SessionPermission }[] };
export const restSessionInclude = {
  agents: { orderBy: { position: 'asc' as const }, select: { agentId: true } },
  users: { orderBy: { createdAt: 'asc' as const }, select: { userId: true, permission: true } },
};

export const restSessionSchema = z
  .object({
    id: z.string(),
    title: z.string().nullable(),
    scenario: z.string().nullable(),
    status: z.enum(SessionStatus),
    owner: z.string().meta({ description: "The owner's id" }),
    agents: z.array(z.string()).meta({ description: 'Agent ids, in the order they answer' }),
    users: z.array(z.object({ user: z.string(), permission: z.enum(SessionPermission) })),
    budget: z.object({
      manna_budget: z.number().nullable(),
      token_budget: z.number().int().nullable(),
      turn_budget: z.number().int().nullable(),
    }),
    spent: z.object({ manna: z.number(), tokens: z.number().int(), turns: z.number().int() }),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'Session' });

export const restToolCallSchema = z
  .object({
    id: z.string(),
    tool: z.string(),
    args: z.unknown(),
    status: z.enum(ToolCallStatus),
    result: z.unknown(),
    cost: z.number().nullable(),
    error: z.string().nullable(),
  })
  .meta({ id: 'ToolCall' });

export const restMessageSchema = z
  .object({
    id: z.string(),
    session: z.string(),
    role: z.enum(MessageRole),
    sender: z.string().nullable().meta({ description: 'The user or agent id' }),
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
    session: z.object({ id: z.string(), title: z.string().nullable(), createdAt: z.date(), agents: z.array(sharedAgentSchema) }),
    messages: z.array(
      z.object({
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
  id: s.id,
  title: s.title,
  scenario: s.scenario,
  status: s.status,
  owner: s.ownerId,
  agents: s.agents.map((a) => a.agentId),
  users: s.users.map((u) => ({ user: u.userId, permission: u.permission })),
  budget: { manna_budget: s.mannaBudget?.toNumber() ?? null, token_budget: s.tokenBudget, turn_budget: s.turnBudget },
  spent: { manna: s.mannaSpent.toNumber(), tokens: s.tokensSpent, turns: s.turnsSpent },
  createdAt: s.createdAt,
  updatedAt: s.updatedAt,
});

export const toRestToolCall = (c: ToolCallView): z.input<typeof restToolCallSchema> => ({
  id: c.id,
  tool: c.tool,
  args: c.args,
  status: c.status,
  result: c.result,
  cost: c.cost,
  error: c.error,
});

export const toRestMessage = (m: MessageView): z.input<typeof restMessageSchema> => ({
  id: m.id,
  session: m.sessionId,
  role: m.role,
  sender: m.senderId,
  prompt_id: m.promptId,
  status: m.status,
  content: m.content,
  attachments: m.attachments,
  thought: m.thought,
  error: m.error,
  tool_calls: m.toolCalls.map(toRestToolCall),
  reactions: m.reactions,
  usage: { prompt_tokens: m.promptTokens, completion_tokens: m.completionTokens },
  createdAt: m.createdAt,
});

export const toRestShare = (s: SharedSession): z.input<typeof restShareSchema> => ({
  share_id: s.shareId,
  title: s.title,
  session: s.session,
  messages: s.messages,
  owner: s.owner,
  createdAt: s.createdAt,
});

const inSession = { session_id: z.string() };
const ofPrompt = { ...inSession, prompt_id: z.string() };
const streamedText = { ...ofPrompt, message_id: z.string(), agent: z.string(), text: z.string() };
const settledToolCall = { ...ofPrompt, message_id: z.string(), agent: z.string(), tool_call: restToolCallSchema };

/** What each event of a session says on REST streams, by `type`. */
const restEventSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('start_prompt'),
    ...ofPrompt,
    message: restMessageSchema,
    agent_ids: z.array(z.string()),
    reply_ids: z.array(z.string()),
  }),
  z.object({ type: z.literal('assistant_token'), ...streamedText }),
  z.object({ type: z.literal('assistant_thinking'), ...streamedText }),
  z.object({
    type: z.literal('assistant_message'),
    ...ofPrompt,
    agent: z.string(),
    content: z.string(),
    message: restMessageSchema,
    tool_calls: z.array(restToolCallSchema),
  }),
  z.object({ type: z.literal('tool_complete'), ...settledToolCall }),
  z.object({ type: z.literal('tool_cancelled'), ...settledToolCall }),
  z.object({ type: z.literal('error'), ...ofPrompt, agent: z.string(), error: z.string(), message: restMessageSchema }),
  z.object({ type: z.literal('end_prompt'), ...ofPrompt }),
  z.object({
    type: z.literal('reaction'),
    ...inSession,
    message_id: z.string(),
    user: z.string().meta({ description: 'The user whose reactions changed' }),
    reactions: z
      .record(z.string(), z.array(z.string()))
      .meta({ description: "That user's reactions now, keyed by their id (merge it into the message's map)" }),
    counts: z.array(z.object({ reaction: z.string(), count: z.number().int() })),
  }),
  z.object({ type: z.literal('session_updated'), ...inSession, title: z.string().nullable(), scenario: z.string().nullable() }),
  z.object({ type: z.literal('user_added'), ...inSession, user: z.string(), permission: z.enum(SessionPermission) }),
  z.object({ type: z.literal('user_removed'), ...inSession, user: z.string() }),
  z.object({ type: z.literal('session_deleted'), ...inSession }),
]);

export const restUpdateFrameSchema = z.object({ event: z.literal('update'), data: restEventSchema }).meta({ id: 'SessionUpdateFrame' });
export const restEndFrameSchema = z
  .object({
    event: z.literal('error'),
    data: z.object({
      error: z.string(),
      code: z.enum(['SLOW_CONSUMER', 'EVENTS_EXPIRED', 'SHUTTING_DOWN', 'SESSION_DELETED', 'ACCESS_REVOKED'] satisfies WatchEnd['code'][]),
      last_event_id: z.number().int().nullable().meta({ description: 'Resume after it with Last-Event-ID' }),
    }),
  })
  .meta({ id: 'SessionStreamEndFrame' });
export const restDoneFrameSchema = z.object({ event: z.literal('done'), data: z.literal('') }).meta({ id: 'SessionStreamDoneFrame' });
/** The JSON on each `data:` line of a session's event stream. */
export const restStreamFrameSchema = z
  .union([restUpdateFrameSchema, restEndFrameSchema, restDoneFrameSchema])
  .meta({ id: 'SessionStreamFrame' });

/**
 * One event as the original's stream frame: `{"event":"update","data":{"type":...}}`, with the
 * session id and, where a message was saved, the message with its id.
 */
export function toRestFrame(e: SessionEvent): z.input<typeof restUpdateFrameSchema> {
  const session_id = e.sessionId;
  const data = ((): z.input<typeof restEventSchema> => {
    switch (e.type) {
      case 'start_prompt':
        return {
          type: e.type,
          session_id,
          prompt_id: e.promptId,
          message: toRestMessage(e.message),
          agent_ids: e.agentIds,
          reply_ids: e.replyIds,
        };
      case 'assistant_token':
      case 'assistant_thinking':
        return { type: e.type, session_id, prompt_id: e.promptId, message_id: e.messageId, agent: e.agentId, text: e.text };
      case 'assistant_message':
        return {
          type: e.type,
          session_id,
          prompt_id: e.promptId,
          agent: e.agentId,
          content: e.message.content,
          message: toRestMessage(e.message),
          tool_calls: e.message.toolCalls.map(toRestToolCall),
        };
      case 'tool_complete':
      case 'tool_cancelled':
        return {
          type: e.type,
          session_id,
          prompt_id: e.promptId,
          message_id: e.messageId,
          agent: e.agentId,
          tool_call: toRestToolCall(e.toolCall),
        };
      case 'error':
        return { type: e.type, session_id, prompt_id: e.promptId, agent: e.agentId, error: e.error, message: toRestMessage(e.message) };
      case 'end_prompt':
        return { type: e.type, session_id, prompt_id: e.promptId };
      case 'reaction':
        return {
          type: e.type,
          session_id,
          message_id: e.messageId,
          user: e.userId,
          reactions: { [e.userId]: e.userReactions },
          counts: e.counts,
        };
      case 'session_updated':
        return { type: e.type, session_id, title: e.title, scenario: e.scenario };
      case 'user_added':
        return { type: e.type, session_id, user: e.userId, permission: e.permission };
      case 'user_removed':
        return { type: e.type, session_id, user: e.userId };
      case 'session_deleted':
        return { type: e.type, session_id };
    }
  })();
  return { event: 'update', data };
}

/** A stream that ends early says why, and from which event a client can resume. */
export const toRestEndFrame = (end: Pick<WatchEnd, 'code' | 'reason' | 'lastSeq'>): z.input<typeof restEndFrameSchema> => ({
  event: 'error',
  data: { error: end.reason, code: end.code, last_event_id: end.lastSeq },
});

export const DONE_FRAME: z.input<typeof restDoneFrameSchema> = { event: 'done', data: '' };
