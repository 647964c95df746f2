import type { Prisma } from '../../generated/prisma/client.ts';
import type { NumberedCut, NumberedWindow } from '../core/byte-pages.ts';
import type { ActorSelection, ReplyStop, WhileReplying } from '../../generated/prisma/enums.ts';
import type { Budget } from '../core/budgets.ts';
import type { MessageView } from '../core/events.ts';
import type { ReplyJob } from '../replies/engine.ts';
import type { Permission } from '../access/service.ts';
import type { AccessStore } from '../access/store.ts';
import type { Signal } from '../signals/service.ts';

/**
 * What REST (its includes) and GraphQL (Pothos' `queryFromInfo`) ask a session read to bring
 * along. The rules pass it through untouched; only the store reads it.
 */
export type SessionQuery = { include?: Prisma.SessionInclude; select?: Prisma.SessionSelect };
/** A session as read with `Q`: the one place the pass-through's result is typed. */
export type SessionRead<Q extends SessionQuery> = Prisma.SessionGetPayload<Q>;

/** Where a session stands in a list by activity: newest first, the id breaking ties. */
export interface SessionPosition {
  updatedAt: Date;
  id: string;
}

/** Which sessions a list holds, for the user named. */
export type SessionFilter =
  /** Those they own. */
  | { ownedBy: string }
  /** Those others own and added them to. */
  | { sharedWith: string }
  /** Those they own or were added to, with the agent when one is named. */
  | { memberOf: string; agentId?: string };

/** An agent of a session, with what decides whether a caller may still prompt it. */
export interface SessionAgent {
  id: string;
  name: string;
  /** Its username, which prompts mention it by. */
  key: string;
  public: boolean;
  ownerId: string;
}

/** An agent a new session's prompt names; with `recall`, what it remembers of the user is read too. */
export interface AgentAsk {
  agentId: string;
  userId: string;
  recall: boolean;
}
type Known = NonNullable<ReplyJob['known']>;
/** An agent as the reply engine takes it for a session just made, and what it recalls of the user. */
export interface NewSessionAgent {
  /** With who may use it: the rules check that before the session is made. */
  agent: Known['agents'][number] & { public: boolean; ownerId: string };
  memories?: string[];
}

export interface SessionSettings {
  title?: string;
  scenario?: string;
  mannaBudget?: number;
  tokenBudget?: number;
  turnBudget?: number;
  /** Autonomy: the three together or none (`autonomy.ts`). */
  autoReply?: boolean;
  replyInterval?: number;
  actorSelection?: ActorSelection;
  /** What a prompt that does not say does while an agent is replying. */
  whileReplying?: WhileReplying;
}

interface PromptParts {
  userId: string;
  /** The prompt's id when the caller chose it (a relayed prompt); else a new one. */
  promptId?: string;
  /** Null: the request only creates or changes the session. */
  prompt: { content: string; attachments: string[]; responders: string[] } | null;
  /** The process that will write the replies (kept on them for recovery if it dies). */
  instance: string;
  /** When given, nothing is saved unless this API key still exists as the prompt is written. */
  keyId?: string | null;
}
/** A prompt to an existing session, with the changes to its settings it carries. */
export interface PromptToSession extends PromptParts {
  session: { id: string; update?: SessionSettings };
  /** What the prompt does if replies are being written in the session; the session's default when absent. */
  whileReplying?: WhileReplying;
}
/** A new session with these agents (in order), and its first prompt. */
export interface PromptToNewSession extends PromptParts {
  session: { create: SessionSettings & { agents: { id: string; name: string }[] } };
}

/** A prompt as saved: the message, and the placeholder reply of each agent that answers it. */
export interface SavedPrompt {
  sessionId: string;
  prompt: MessageView | null;
  replies: ReplyJob['replies'];
  /** The first exchange of a session without a title: the replies name it afterwards. */
  firstExchange: boolean;
  /** Replies that were being written when the prompt was saved: its own replies start after they end. */
  waitFor?: string[];
  /** The prompts whose replies the prompt asked to stop (`interrupt`, `rollback`), and how. */
  stopped?: { promptIds: string[]; how: ReplyStop };
}
/** A new session's prompt, with the conversation so far (what its replies start from). */
export interface SavedNewSession extends SavedPrompt {
  history: Known['history'];
}

/** The API key a prompt was sent with was deleted while it was being taken in: nothing was saved. */
export class KeyGone extends Error {
  override name = 'KeyGone';
}

/** A relayed prompt's id is saved already (the same update relayed twice): nothing was saved again. */
export class PromptSavedAlready extends Error {
  override name = 'PromptSavedAlready';
}

/** Replies are being written and the prompt said `reject`: nothing was saved. */
export class RepliesUnderWay extends Error {
  override name = 'RepliesUnderWay';
  constructor(readonly replyIds: string[]) {
    super('replies are being written in the session');
  }
}

/** A budget of the session has no room for the prompt's turns: nothing was saved. */
export class BudgetStop extends Error {
  override name = 'BudgetStop';
  constructor(readonly budget: Budget) {
    super(`the session's ${budget} budget stopped the prompt`);
  }
}

/** The user already has as many reactions on the message as allowed: nothing changed. */
export class ReactionLimitReached extends Error {
  override name = 'ReactionLimitReached';
}

/** Which part of a session's messages a page reads (ordinals are the messages' order). */
export interface MessageWindow {
  after: number | null;
  before: number | null;
  /** Reads from `after` onwards when true, else back from `before` (or the latest). */
  forwards: boolean;
  take: number;
  /** The page stops before a message that would take its text past this (the first always fits). */
  maxBytes: number;
}

/** A page of messages, oldest first, and whether the window held more. */
export interface MessageSlice {
  messages: MessageView[];
  more: boolean;
}

export interface ReactionToggle {
  messageId: string;
  userId: string;
  reaction: string;
  /** The reaction this one takes the place of, if the user has it. */
  replaces?: string;
  /** Reactions one user may have on one message. */
  limit: number;
}

/**
 * Every statement the session rules need. Writes that must not interleave with others are one
 * call each here, so an implementation can make them one transaction.
 */
export interface SessionStore extends AccessStore {
  /** The session's agents, in the order they answer. */
  sessionAgents(sessionId: string): Promise<SessionAgent[]>;
  /** The agents asked for that exist. */
  agentsForNewSessions(asks: readonly AgentAsk[]): Promise<Map<AgentAsk, NewSessionAgent>>;

  /**
   * Saves a prompt to an existing session at once: its settings, the turns of every agent that
   * answers (so concurrent prompts never run more model calls than the budget allows), the
   * message and a placeholder reply per agent. Throws KeyGone, BudgetStop or (a relayed prompt's
   * id saved already) PromptSavedAlready, saving nothing.
   */
  addPrompt(p: PromptToSession): Promise<SavedPrompt>;
  /** Makes a session with its agents, its owner and its first prompt. Throws KeyGone, saving nothing. */
  createSession(p: PromptToNewSession): Promise<SavedNewSession>;
  /** Changes the settings of a session that exists (those undefined are left as they are). */
  updateSettings(sessionId: string, settings: SessionSettings): Promise<void>;
  /** The session's title and scenario, as they are now. */
  settingsOf(sessionId: string): Promise<{ title: string | null; scenario: string | null } | null>;

  /** A session that exists (its place was just read). */
  session<Q extends SessionQuery>(id: string, query: Q): Promise<SessionRead<Q>>;
  /** A page of sessions by activity after `from`, and where the next page starts when there is one. */
  sessions<Q extends SessionQuery>(
    filter: SessionFilter,
    page: { from: SessionPosition | null; limit: number },
    query: Q,
  ): Promise<{ sessions: SessionRead<Q>[]; next: SessionPosition | null }>;
  /**
   * A numbered page of sessions by activity cut by bytes (`numberedCut`: each session sized by its
   * title, scenario, agents and members), how many there are in all and where the page falls.
   */
  numberedSessions<Q extends SessionQuery>(
    filter: SessionFilter,
    window: NumberedWindow,
    query: Q,
  ): Promise<{ sessions: SessionRead<Q>[]; total: number; cut: NumberedCut }>;
  /** A user or agent profile by username. */
  userNamed(username: string): Promise<{ id: string; type: 'user' | 'agent' } | null>;

  message(id: string): Promise<MessageView | null>;
  messages(sessionId: string, window: MessageWindow): Promise<MessageSlice>;
  /** The session and a page of its messages as of one moment (a reply ending between two reads would show done while its tokens are not yet counted). */
  sessionWithMessages<Q extends SessionQuery>(
    id: string,
    query: Q,
    window: MessageWindow,
  ): Promise<{ session: SessionRead<Q>; page: MessageSlice }>;

  /** The session a message is in, or null for no such message. */
  sessionOfMessage(messageId: string): Promise<string | null>;
  /**
   * Takes the user's reaction off the message if they have it, else puts it on (taking off the
   * one it replaces), one user's toggles on one message at a time. Throws ReactionLimitReached.
   * Returns every reaction of the message, oldest first.
   */
  toggleReaction(t: ReactionToggle): Promise<{ added: boolean; reactions: { userId: string; reaction: string }[] }>;
  /** The user's reactions on a message of a session they own or were added to. */
  reactionsOf(messageId: string, userId: string): Promise<string[]>;
  /** How many prompts (of the session, or just this one) have replies being written. */
  promptsAnswering(sessionId: string, promptId?: string): Promise<number>;

  /**
   * Deletes the session with everything in it, giving back what its running tool calls hold, and
   * records `signal` with the deletion. Returns the signal's id (see `signals/`).
   */
  deleteSession(id: string, signal: Signal): Promise<bigint>;
  /** The owner of a session that exists. */
  ownerOf(sessionId: string): Promise<string>;
  /** Adds the user to the session, or changes their permission. */
  setMember(sessionId: string, userId: string, permission: Permission): Promise<void>;
  /** Removes the user, recording `signal` with it; null when they were not in the session. */
  removeMember(sessionId: string, userId: string, signal: Signal): Promise<bigint | null>;
}
