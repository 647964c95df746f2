import type { OwnerPays, TaskStatus } from '../core/vocabulary.ts';
import type { ToolCallView } from '../core/events.ts';
import type { Manna } from '../core/manna.ts';
import type { RequestedToolCall } from '../core/tool-host.ts';
import type { MadeCreation } from '../creations/store.ts';

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
  ): Promise<{ tools: unknown; toolApproval: unknown; ownerPays: OwnerPays; agentOwnerId: string; sessionOwnerId: string }>;
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
