import type { AutonomyStopReason } from '../core/events.ts';
import type { ActorSelection } from '../core/vocabulary.ts';
import type { Budget } from '../core/budgets.ts';
import type { Target } from '../replies/runtime.ts';
import type { SessionAgent } from '../sessions/store.ts';

/** What the autonomy rules decide a session's next step from (`service.ts`). */
export interface AutonomyState {
  autoReply: boolean;
  replyInterval: number;
  actorSelection: ActorSelection;
  ownerId: string;
  /** The session's agents in order, with who may use each. */
  agents: SessionAgent[];
  /** The agent that wrote the latest reply, if any. */
  lastSpeakerId: string | null;
  /** When the latest finished user message or reply was last written; null for none. */
  lastActivityAt: Date | null;
  /** A reply is being written in the session. */
  replying: boolean;
  budget: { turns: number | null; tokens: number | null; manna: number | null };
  spent: { turns: number; tokens: number; manna: number };
}

/** A session's autonomy as a change of it needs to know: is it on, and is there a budget to bound it. */
export interface AutonomyStanding {
  autoReply: boolean;
  budgeted: boolean;
}

/** What `startTurn` did: the turn's reply placeholder, or why it did not start. */
export type TurnStart = { started: Target } | { busy: true } | { stopped: Budget };

/** Every statement of the autonomy rules. */
export interface AutonomyStore {
  /** Null when the session is gone (or has never had autonomy settings). */
  state(sessionId: string): Promise<AutonomyState | null>;
  standing(sessionId: string): Promise<AutonomyStanding | null>;
  /**
   * In one transaction: spends a turn of the session's budget, then, when no reply is being
   * written, saves the agent's placeholder reply (its own prompt: `promptId` is its id) for
   * `instance` to write. A budget with no room stops it; a reply under way makes it `busy`
   * (the turn is not spent).
   */
  startTurn(sessionId: string, agentId: string, instance: string): Promise<TurnStart>;
  /**
   * Sets auto-reply off if it is on; whether it was. A stop for `reason` other than the owner's
   * own is written for the owner's webhooks (`autonomy.stopped`) with it.
   */
  turnOff(sessionId: string, reason: AutonomyStopReason, detail: string): Promise<boolean>;
  /** How the reply ended, and its error. */
  replyOutcome(messageId: string): Promise<{ status: string; error: string | null } | null>;
}
