import type { LlmConfig } from '../../config.ts';
import type { Metrics } from '../../observability/metrics.ts';
import type { ChatMessage, ChatProvider } from '../core/chat.ts';
import type { SessionEventPayload } from '../core/events.ts';
import type { FeedEventPayload } from '../core/feed-events.ts';
import type { MemoryHost, PausedCall, ToolHost, ToolResult } from '../core/tool-host.ts';
import type { MessageRow } from '../core/stores/message-rows.ts';
import type { Outcome, ReplyAgent, ReplyStore } from './ports.ts';
import type { ReplyWriter } from './writer.ts';

/** One prompt's replies, as the sessions service hands them over once the prompt is saved. */
export interface ReplyJob {
  sessionId: string;
  promptId: string;
  /** The user who sent the prompt. */
  userId: string;
  /** The placeholder assistant message of each agent that answers, made with the prompt. */
  replies: { messageId: string; agentId: string; ordinal: number; createdAt: Date }[];
  thinking: boolean;
  excludeMemory: boolean;
  /** The first exchange of a session without a title: name it afterwards. */
  generateTitle: boolean;
  /** Replies under way when the prompt was saved: these replies start once they have ended. */
  after?: string[];
  /** The session and its messages so far, when the caller has them (a session it just created). */
  known?: {
    scenario: string | null;
    agents: ReplyAgent[];
    history: HistoryRow[];
    /** What each agent remembers of the user, read with the agents (absent with `excludeMemory`). */
    memories?: Map<string, string[]>;
  };
}

/** A message as the caller read it: tool calls and reactions only where it had them to read. */
export type HistoryRow = Omit<MessageRow, 'toolCalls' | 'reactions'> &
  Partial<Pick<MessageRow, 'toolCalls' | 'reactions'>> & { sender: { username: string } | null };

/** One agent's reply to a prompt. */
export type Target = ReplyJob['replies'][number];

/** What a reply had written when it ended. */
export type Written = Pick<Outcome, 'content' | 'thought' | 'promptTokens' | 'completionTokens'>;

/**
 * A reply paused at tool calls that wait for approval, as it is saved on its message: all it
 * needs to go on, on whichever instance takes it (plain JSON).
 */
export interface PausedReply {
  /** `generateTitle` is absent on replies paused before it was kept: they are not named. */
  job: Pick<ReplyJob, 'sessionId' | 'promptId' | 'userId' | 'thinking' | 'excludeMemory'> & { generateTitle?: boolean };
  target: Omit<Target, 'createdAt'> & { createdAt: string };
  /** Every reply to the prompt: the last of them to end ends the prompt (`end_prompt`). */
  replyIds: string[];
  /** The model call whose tools it waits for (counted from 0). */
  call: number;
  /** The model messages so far, the one asking for the tools last. */
  messages: ChatMessage[];
  /** The round's calls in the model's order, by its ids: their results go back in it. */
  order: string[];
  /** Results of the round's calls that did not wait (they ran, or were refused). */
  results: ToolResult[];
  /** The calls that wait. */
  waiting: PausedCall[];
  written: Written;
}

/** A call's timeout: when it counts as denied if its payer has not answered. */
export interface ApprovalDeadline {
  taskId: string;
  sessionId: string;
  messageId: string;
  at: Date;
  timeoutSeconds: number;
}

/** Where the timeouts of calls that wait for approval are kept (delayed jobs on the job queue). */
export interface ApprovalTimers {
  schedule(deadlines: ApprovalDeadline[]): Promise<void>;
}

/** What every part of a reply runs with: the engine's dependencies, and its ways to tell and to end. */
export interface ReplyRuntime {
  store: ReplyStore;
  provider: ChatProvider;
  /** True for the offline responder: titles then come from the text, not from a model call. */
  offline: boolean;
  llm: LlmConfig;
  tools: ToolHost;
  memory: MemoryHost;
  writer: ReplyWriter;
  log: { error(obj: unknown, msg?: string): void };
  metrics: Metrics['replies'];
  /** Publishes to the session's watchers; a failure to publish is logged, never thrown. */
  emit(sessionId: string, event: SessionEventPayload): Promise<unknown>;
  /** Publishes to a user's own feed; likewise. */
  tell(userId: string, event: FeedEventPayload): Promise<unknown>;
  approvals: ApprovalTimers;
  /** Ends a reply that did not complete (`endings.ts`). */
  fail(job: ReplyJob, target: Target, reason: unknown, written: Written): Promise<void>;
  /** Resolves once none of these replies of the session is being written any more (rejects when `signal` aborts). */
  ended(sessionId: string, messageIds: string[], signal: AbortSignal): Promise<void>;
  /** Work that shutdown waits for (within its grace period), besides the replies. */
  track(task: Promise<void>): void;
  /** Aborted when the grace period ends: what a reply set off afterwards (memories) is given up. */
  housekeeping: AbortSignal;
}
