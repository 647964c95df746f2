import type { ChatTool } from '../core/chat.ts';
import type { OwnerPays, TaskStatus } from '../core/vocabulary.ts';
import type { ToolCallView } from '../core/events.ts';
import type { Manna } from '../core/manna.ts';
import type { RequestedToolCall } from '../core/tool-host.ts';
import type { MadeCreation } from '../creations/store.ts';
import type { ToolOutput } from './executors/types.ts';

/** A tool call as saved: pending until it is charged. */
export interface RecordedCall {
  id: string;
  /** Its place among all the calls of its reply. */
  position: number;
  tool: string;
}

/** Where a call belongs. */
export interface CallPlace {
  sessionId: string;
  messageId: string;
}

/** Where a reply's calls belong, and whose they are: a call is a task of the user who pays for it. */
export interface CallOwner extends CallPlace {
  agentId: string;
  payer: string;
}

/** How a call ended. */
export interface Settlement {
  status: 'completed' | 'failed' | 'cancelled';
  result?: unknown;
  error?: string;
}

/** A file a call made, saved as a creation of the user with the call's settlement. */
export type CallCreation = MadeCreation;

/**
 * Why a hold took nothing: the session's manna budget, the daily cap of the deployment whose chat
 * the session is, the payer's balance, or the call gone.
 */
export type HoldRefused = { refused: 'budget' } | { refused: 'cap' } | { refused: 'balance'; balance: Manna } | { refused: 'gone' };

/** The statements of tools at work in replies. */
export interface ToolStore {
  /**
   * The tools the agent's owner enabled, which of their calls wait for approval, who pays for
   * what it does, and the session's owner.
   */
  payers(
    agentId: string,
    sessionId: string,
  ): Promise<{
    tools: unknown;
    toolApproval: unknown;
    ownerPays: OwnerPays;
    agentOwnerId: string;
    sessionOwnerId: string;
    mcpTools?: number;
  }>;
  /** Saves the calls as tasks of the payer, pending, after the message's earlier ones; returns them in order. */
  record(owner: CallOwner, calls: RequestedToolCall[]): Promise<RecordedCall[]>;
  /**
   * Charges a call before it runs, in one transaction with its ledger rows: `cost` (if any) within
   * the session's manna budget and its deployment's daily cap, from the payer's balance, and the
   * call moved to running. Null
   * when it is; otherwise why not, with nothing taken.
   */
  hold(call: RecordedCall, cost: Manna, payer: string, place: CallPlace): Promise<HoldRefused | null>;
  /**
   * Settles a call still `held ? running : pending`, in one transaction: its status and result,
   * its hold refunded (a held call that did not complete), its creations saved. Returns the call
   * as saved, or null when someone else settled it first (its session deleted, say).
   */
  settle(call: RecordedCall, place: CallPlace, outcome: Settlement, held: boolean, creations: CallCreation[]): Promise<ToolCallView | null>;
  /** Moves a pending call to `awaiting_approval` at `price` (nothing held); the call as saved, or null when it is no longer pending. */
  awaitApproval(call: RecordedCall, price: Manna): Promise<ToolCallView | null>;
  /** Where the calls a reply paused at stand now: approved ones are `pending` again, denied ones `failed` with why. */
  approvalOutcomes(ids: string[]): Promise<{ id: string; status: TaskStatus; error: string | null }[]>;
}

/** How far a call is, as its tool reports it: from 0 to 1, or null when it gives no total; and what it is doing. */
export type ReportProgress = (fraction: number | null, detail?: string) => void;

/**
 * A tool a reply's call can run, whatever runs it: a registry tool's executor, or a tool of one
 * of the agent's owner's MCP servers. Each call goes the same way (`run-call.ts`): checked, given
 * a turn, held, run, settled.
 */
export interface RunnableTool {
  /** The name the call is saved under, and the creations it makes. */
  key: string;
  /** The model's arguments (JSON text) checked; a refusal is told the model and nothing is charged. */
  check(raw: string): { args: Record<string, unknown> } | { error: string };
  cost(args: Record<string, unknown>): Manna;
  /** Runs the call; a `ToolError` is a failure the model is told. */
  execute(run: {
    args: Record<string, unknown>;
    userId: string;
    agentId: string;
    sessionId: string;
    signal: AbortSignal;
    progress: ReportProgress;
  }): Promise<ToolOutput>;
}

/** A tool offered to the model: the function it sees, and what runs a call of it. */
export interface OfferedTool {
  chat: ChatTool;
  tool: RunnableTool;
}

/**
 * Tools of MCP servers an agent's owner enabled on it (the mcp-servers service gives them): the
 * ones their servers list now, by the function name the model is given. A server out of reach
 * gives none, and the reply goes on with the rest.
 */
export interface McpToolSource {
  forAgent(agentId: string): Promise<Map<string, OfferedTool>>;
}
