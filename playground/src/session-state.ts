import type { Message, Reaction, SessionEvent, ToolCall } from './operations.ts';

/**
 * A session as the page shows it, built from its messages and then from its live events. `seq`
 * is the last event applied: events at or before it are ones already in the state, so a replay
 * (after a reload or a reconnection) adds nothing twice.
 */
export interface SessionState {
  seq: number | null;
  order: string[];
  messages: Record<string, Message>;
}

export const fromMessages = (messages: Message[]): SessionState => ({
  seq: null,
  order: messages.map((m) => m.id),
  messages: Object.fromEntries(messages.map((m) => [m.id, m])),
});

const placeholder = (id: string, agent: { id: string; name: string } | null): Message => ({
  id,
  role: 'ASSISTANT',
  content: '',
  thought: null,
  status: 'STREAMING',
  error: null,
  promptId: null,
  createdAt: new Date().toISOString(),
  agent,
  sender: null,
  toolCalls: [],
  reactions: [],
});

/** The calls with `call` in its place (or added last), as it stands now. */
export const withCall = (calls: ToolCall[], call: ToolCall) =>
  calls.some((c) => c.id === call.id) ? calls.map((c) => (c.id === call.id ? { ...c, ...call } : c)) : [...calls, call];

export function applyEvent(state: SessionState, event: SessionEvent, agentName: (id: string) => string): SessionState {
  if (state.seq !== null && event.seq <= state.seq) return state;
  const messages = { ...state.messages };
  const order = [...state.order];
  const put = (m: Message) => {
    if (!messages[m.id]) order.push(m.id);
    messages[m.id] = m;
  };
  const reply = (id: string, agentId?: string) =>
    messages[id] ?? placeholder(id, agentId ? { id: agentId, name: agentName(agentId) } : null);
  switch (event.__typename) {
    case 'PromptStarted':
      if (event.message) put(event.message);
      event.replyIds?.forEach((id, i) => {
        const agentId = event.agentIds?.[i];
        put({ ...reply(id, agentId), promptId: event.promptId ?? null });
      });
      break;
    case 'AssistantToken': {
      const m = reply(event.messageId!, event.agentId);
      put({ ...m, content: m.content + (event.text ?? '') });
      break;
    }
    case 'AssistantThinking': {
      const m = reply(event.messageId!, event.agentId);
      put({ ...m, thought: (m.thought ?? '') + (event.text ?? '') });
      break;
    }
    case 'ToolCompleted':
    case 'ToolCancelled':
    case 'ToolApprovalRequested':
    // Answered here, in another tab, in a chat or by its timeout: the card goes at once.
    case 'ToolApprovalSettled': {
      const m = reply(event.messageId!, event.agentId);
      const call = { ...(event.toolCall as ToolCall), ...(event.expiresAt ? { expiresAt: event.expiresAt } : {}) };
      put({ ...m, toolCalls: withCall(m.toolCalls, call) });
      break;
    }
    case 'AssistantMessage':
    case 'ReplyFailed':
      if (event.message) put({ ...event.message, error: event.message.error ?? event.error ?? null });
      break;
    case 'ReplyRemoved':
      // Rolled back by a newer prompt: it is gone from the session, so from the page too.
      delete messages[event.messageId!];
      return { seq: event.seq, order: order.filter((id) => id !== event.messageId), messages };
    case 'ReactionsChanged': {
      const m = messages[event.messageId!];
      if (m) put({ ...m, reactions: event.reactions as Reaction[] });
      break;
    }
  }
  return { seq: event.seq, order, messages };
}

const storageKey = (sessionId: string) => `parley.session.${sessionId}`;

/** This tab's copy of a session, so a reload resumes from the last event it showed. */
export const saved = (sessionId: string): SessionState | null => {
  try {
    return JSON.parse(sessionStorage.getItem(storageKey(sessionId)) ?? 'null') as SessionState | null;
  } catch {
    return null;
  }
};
export const save = (sessionId: string, state: SessionState) => sessionStorage.setItem(storageKey(sessionId), JSON.stringify(state));
export const forget = (sessionId: string) => sessionStorage.removeItem(storageKey(sessionId));
