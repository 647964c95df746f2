import type { Session } from '../generated/prisma/client.ts';
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

export type RestSessionRow = Session & { agents: { agentId: string }[]; users: { userId: string; permission: string }[] };
export const restSessionInclude = {
  agents: { orderBy: { position: 'asc' as const }, select: { agentId: true } },
  users: { orderBy: { createdAt: 'asc' as const }, select: { userId: true, permission: true } },
};

export const toRestSession = (s: RestSessionRow) => ({
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

export const toRestToolCall = (c: ToolCallView) => ({ id: c.id, tool: c.tool, args: c.args, status: c.status, result: c.result, cost: c.cost, error: c.error });

export const toRestMessage = (m: MessageView) => ({
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

export const toRestShare = (s: SharedSession) => ({
  share_id: s.shareId,
  title: s.title,
  session: s.session,
  messages: s.messages,
  owner: s.owner,
  createdAt: s.createdAt,
});

/**
 * One event as the original's stream frame: `{"event":"update","data":{"type":...}}`, with the
 * session id and, where a message was saved, the message with its id.
 */
export function toRestFrame(e: SessionEvent) {
  const base = { type: e.type, session_id: e.sessionId };
  const data = (() => {
    switch (e.type) {
      case 'start_prompt':
        return { ...base, prompt_id: e.promptId, message: toRestMessage(e.message), agent_ids: e.agentIds, reply_ids: e.replyIds };
      case 'assistant_token':
      case 'assistant_thinking':
        return { ...base, prompt_id: e.promptId, message_id: e.messageId, agent: e.agentId, text: e.text };
      case 'assistant_message':
        return { ...base, prompt_id: e.promptId, agent: e.agentId, content: e.message.content, message: toRestMessage(e.message), tool_calls: e.message.toolCalls.map(toRestToolCall) };
      case 'tool_complete':
      case 'tool_cancelled':
        return { ...base, prompt_id: e.promptId, message_id: e.messageId, agent: e.agentId, tool_call: toRestToolCall(e.toolCall) };
      case 'error':
        return { ...base, prompt_id: e.promptId, agent: e.agentId, error: e.error, message: toRestMessage(e.message) };
      case 'end_prompt':
        return { ...base, prompt_id: e.promptId };
      case 'reaction':
        return { ...base, message_id: e.messageId, reactions: e.reactions };
      case 'session_updated':
        return { ...base, title: e.title, scenario: e.scenario };
      case 'user_added':
        return { ...base, user: e.userId, permission: e.permission };
      case 'user_removed':
        return { ...base, user: e.userId };
      case 'session_deleted':
        return base;
    }
  })();
  return { event: 'update', data };
}

/** A stream that ends early says why, and from which event a client can resume. */
export const toRestEndFrame = (end: Pick<WatchEnd, 'code' | 'reason' | 'lastSeq'>) => ({
  event: 'error',
  data: { error: end.reason, code: end.code, last_event_id: end.lastSeq },
});

export const DONE_FRAME = { event: 'done', data: '' };
