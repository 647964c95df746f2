import type { Budget } from '../core/budgets.ts';
import type { MessageView } from '../core/events.ts';
import type { PausedReply } from './runtime.ts';

/** An agent as its replies need it: its profile and settings, and the username that is its key. */
export interface ReplyAgent {
  id: string;
  name: string;
  description: string;
  persona: string;
  greeting: string;
  knowledge: string;
  /** The agent's JSON columns, read through `agents/fields.ts`. */
  tools: unknown;
  suggestions: unknown;
  llmSettings: unknown;
  user: { username: string };
  /** How many tools of MCP servers its owner enabled on it: with none, no server is asked what it offers. */
  mcpTools?: number;
}

/** A message of the conversation so far, with the username of whoever wrote it. */
export interface HistoryEntry {
  message: MessageView;
  senderName: string | null;
}

/** What a prompt's replies start from. */
export interface Conversation {
  scenario: string | null;
  /** The session's agents, in its order. */
  agents: ReplyAgent[];
  /** Its latest finished messages, oldest first. */
  history: HistoryEntry[];
}

/** How a reply ended, as it is saved. */
export interface Outcome {
  content: string;
  thought: string;
  status: 'complete' | 'failed' | 'cancelled' | 'interrupted';
  error: string | null;
  promptTokens: number;
  completionTokens: number;
}

/** A reply's text so far, saved now and then while it streams. */
export interface Checkpoint {
  messageId: string;
  content: string;
  thought: string;
}

/** A reply that completed, with its token usage (added to its session's counter). */
export interface Completion extends Checkpoint {
  sessionId: string;
  promptTokens: number;
  completionTokens: number;
}

/** A title for a session whose first exchange ended. */
export interface Title {
  sessionId: string;
  title: string;
}

/**
 * Every statement the reply engine and its writer make. Failures come through as the database
 * gave them (`core/prisma-errors.ts` tells them apart).
 */
export interface ReplyStore {
  /** The session's scenario, agents and latest `historyLimit` finished messages; null when the session is gone. */
  conversation(sessionId: string, historyLimit: number): Promise<Conversation | null>;
  /**
   * Spends one more model call of the session's turn budget if every budget still allows it;
   * `pendingTokens` are the reply's own, not saved yet. Returns the budget that stopped it, or null.
   */
  reserveTurn(sessionId: string, pendingTokens: number): Promise<Budget | null>;
  /** Saves a streaming reply's text as it stands, for its watchers to see with its tool calls. */
  saveText(messageId: string, content: string): Promise<MessageView>;
  /**
   * Saves a reply that did not complete, with its tokens counted on the session, in one
   * transaction; a tool call of it still unsettled ends with `toolError` (its hold given back).
   */
  closeReply(sessionId: string, messageId: string, outcome: Outcome, toolError: string): Promise<MessageView>;
  /**
   * Removes a reply a newer prompt rolled back, in one transaction: its tokens counted on the
   * session, its unsettled tool calls ended with `toolError` (holds given back); false when it was
   * no longer being written.
   */
  removeReply(sessionId: string, messageId: string, tokens: number, toolError: string): Promise<boolean>;
  /** Those of these replies still being written. */
  stillWriting(messageIds: string[]): Promise<string[]>;
  /** What a newer prompt asked of this reply, while it is being written. */
  stopRequested(messageId: string): Promise<'interrupt' | 'rollback' | null>;
  /**
   * Pauses a reply at calls that wait for approval: its text so far and what it needs to go on,
   * and no instance named as writing it. The message as saved, with its calls; null when it is
   * no longer being written, or a newer prompt asked it to stop.
   */
  pause(messageId: string, content: string, state: PausedReply): Promise<MessageView | null>;
  /**
   * Takes a paused reply to go on with, once none of its calls waits any more: its state, with
   * `instance` named as writing it; null when there is none to take (not paused, still waiting,
   * or taken by another instance first).
   */
  claimPaused(messageId: string, instance: string): Promise<PausedReply | null>;
  /** Takes the paused replies of a session (of one prompt, when given) to end them: a newer prompt or a cancel stops them. */
  claimPausedIn(sessionId: string, promptId: string | undefined, instance: string): Promise<PausedReply[]>;
  /** Saves the text of the replies still streaming among these, in one statement. */
  saveCheckpoints(group: Checkpoint[]): Promise<void>;
  /**
   * Saves these replies as complete, and their tokens on their sessions, in one transaction, for
   * those still streaming (none is counted twice); returns the messages saved, by id.
   */
  saveCompletions(group: Completion[]): Promise<Map<string, MessageView>>;
  /** Names the sessions that have no title yet (the first title for a session wins); returns those named. */
  nameSessions(group: Title[]): Promise<Set<string>>;
}

/** A reply as saved, as whoever waits for it reads it. */
export interface SavedReply {
  messageId: string;
  status: 'streaming' | 'complete' | 'failed' | 'cancelled' | 'interrupted';
  content: string;
  error: string | null;
  toolCalls: { status: string; result: unknown; error: string | null }[];
}

/** A prompt's session and its replies as saved, in their order. */
export interface PromptOutcome {
  sessionId: string;
  replies: SavedReply[];
}

/** The read behind `awaitOutcome` (`outcome.ts`). */
export interface PromptOutcomes {
  /** The prompt's session and replies; null when the prompt is not saved (or its session was deleted). */
  promptOutcome(promptId: string): Promise<PromptOutcome | null>;
}

/** Which streaming replies recovery takes. */
export interface AbandonedReplies {
  /** Only replies written by this instance. */
  instanceId?: string;
  /** Only replies not saved since this time. */
  olderThan?: Date;
}

export interface RecoveredReply {
  sessionId: string;
  promptId: string | null;
  agentId: string | null;
  message: MessageView;
}

/** The statements of start-up and dead-instance recovery. */
export interface RecoveryStore {
  /** Sessions holding replies that `which` takes, at most `take`. */
  sessionsWithAbandoned(which: AbandonedReplies, take: number): Promise<string[]>;
  /**
   * With the session locked (before its tool calls, in the order settling takes them): its
   * replies that `which` takes, still streaming, saved as failed with `errors.reply`; their running
   * tool calls cancelled with `errors.tool` and their holds refunded, their pending ones cancelled.
   */
  closeAbandoned(sessionId: string, which: AbandonedReplies, errors: { reply: string; tool: string }): Promise<RecoveredReply[]>;
  /** Instances other than `self` that have replies streaming. */
  streamingInstances(self: string): Promise<string[]>;
}
