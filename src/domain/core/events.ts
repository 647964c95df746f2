import type { MessageRole, MessageStatus, SessionPermission, TaskStatus, ToolApprovalState } from './vocabulary.ts';

/**
 * What a session's watchers are told, independent of transport: REST writes these as SSE frames,
 * GraphQL as typed subscription events. Everything is plain JSON (dates as ISO strings) because
 * events may cross processes.
 */
export interface ToolCallView {
  id: string;
  tool: string;
  args: unknown;
  status: TaskStatus;
  result: unknown;
  cost: number | null;
  error: string | null;
  /** For a call that needed its payer's yes: where that stands; null when none was needed. */
  approval: ToolApprovalState | null;
}

/** A reply's tool call that waits for its payer's answer (until `expiresAt`), or that ended: what a follower of the reply is told. */
export type ToolCallChange =
  | { type: 'approval_requested'; toolCall: ToolCallView; expiresAt: string }
  | { type: 'approval_settled'; toolCall: ToolCallView }
  | { type: 'ended'; toolCall: ToolCallView };

/** Who reacted how: user id → reactions, as the original service stored them. */
export type ReactionsView = Record<string, string[]>;

/** How many users gave one reaction. */
export interface ReactionTotal {
  reaction: string;
  count: number;
}

export interface MessageView {
  id: string;
  sessionId: string;
  ordinal: number;
  role: MessageRole;
  senderId: string | null;
  promptId: string | null;
  status: MessageStatus;
  content: string;
  attachments: string[];
  thought: string | null;
  error: string | null;
  promptTokens: number;
  completionTokens: number;
  toolCalls: ToolCallView[];
  reactions: ReactionsView;
  createdAt: string;
}

/** Why an autonomous session stopped: a budget is spent, its owner turned it off, no agent can speak, a turn failed. */
export const autonomyStopReasons = ['turn_budget', 'token_budget', 'manna_budget', 'turned_off', 'no_agent', 'reply_failed'] as const;
export type AutonomyStopReason = (typeof autonomyStopReasons)[number];

/**
 * Every event a session's watchers are told, by type: the one list of them. Each transport maps
 * it with a record keyed by these types, so an event added here does not compile until GraphQL
 * and REST both say how to show it.
 */
export interface SessionEventPayloads {
  /** A user message arrived; `replyIds` are the assistant messages that will answer it. */
  start_prompt: { promptId: string; message: MessageView; agentIds: string[]; replyIds: string[] };
  assistant_token: { promptId: string; messageId: string; agentId: string; text: string };
  assistant_thinking: { promptId: string; messageId: string; agentId: string; text: string };
  assistant_message: { promptId: string; agentId: string; message: MessageView };
  /**
   * A tool call of a reply under way says how far it is: `progress` from 0 to 1, or null when the
   * tool gives no total; `detail`, what it is doing (transports name it `message`, as tasks'
   * progress does). Not saved: only its watchers see it.
   */
  tool_progress: {
    promptId: string;
    messageId: string;
    agentId: string;
    toolCallId: string;
    tool: string;
    progress: number | null;
    detail: string | null;
  };
  tool_complete: { promptId: string; messageId: string; agentId: string; toolCall: ToolCallView };
  tool_cancelled: { promptId: string; messageId: string; agentId: string; toolCall: ToolCallView };
  /**
   * The reply paused at a call that waits for its payer's yes (`toolCall`: its arguments, and its
   * price as `cost`); it goes on once answered, or denied at `expiresAt`.
   */
  tool_approval_requested: { promptId: string; messageId: string; agentId: string; toolCall: ToolCallView; expiresAt: string };
  /**
   * A call that waited was answered (`toolCall.approval`: approved, denied, or expired when its
   * timeout came), on whichever surface: told at once, before its reply goes on. A denied call
   * ends then too (`tool_complete`); an approved one runs when its reply goes on.
   */
  tool_approval_settled: { promptId: string; messageId: string; agentId: string; toolCall: ToolCallView };
  /** One reply failed; `message` is the saved (failed) assistant message with its partial text. */
  error: { promptId: string; agentId: string; error: string; message: MessageView };
  end_prompt: { promptId: string };
  /** A reply was rolled back by a newer prompt: it is gone from the session, its running tools refunded. */
  reply_removed: { promptId: string; messageId: string; agentId: string };
  /**
   * An agent of an autonomous session takes its turn, with no user message: its reply `replyId`
   * streams like any other, under `promptId`, the turn's own id (the reply's).
   */
  autonomous_turn: { promptId: string; agentId: string; replyId: string };
  /** An autonomous session stopped taking turns, and why (`docs/autonomy.md`). */
  autonomy_stopped: { reason: AutonomyStopReason; detail: string };
  /**
   * One user's reactions on a message changed: what they have now, and the message's totals. Not
   * every reaction with its user: that grows with every reaction, and each event would carry it.
   */
  reaction: { messageId: string; userId: string; userReactions: string[]; counts: ReactionTotal[] };
  session_updated: { title: string | null; scenario: string | null };
  user_added: { userId: string; permission: SessionPermission };
  user_removed: { userId: string };
  session_deleted: Record<never, never>;
}

export type SessionEventType = keyof SessionEventPayloads;

export type SessionEventPayload = { [T in SessionEventType]: { type: T } & SessionEventPayloads[T] }[SessionEventType];

/**
 * An event as published: numbered per session (`seq` only grows), with its session and time.
 * Seqs follow on one by one; where numbers were skipped (an instance that numbered the session
 * went away), `prev` is the seq this event follows. Watchers carry on across; clients never see it.
 */
export type SessionEvent = SessionEventPayload & { seq: number; sessionId: string; at: string; prev?: number };

/** One type of event as published. */
export type SessionEventOf<T extends SessionEventType> = Extract<SessionEvent, { type: T }>;

/** Events that belong to one prompt's stream (what `sendMessage` and a REST `stream: true` reply show). */
export const promptOf = (event: SessionEvent): string | null => ('promptId' in event ? event.promptId : null);
