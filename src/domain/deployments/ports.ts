import type { ToolCallChange } from '../core/events.ts';
import type { DeploymentPlatform } from '../core/vocabulary.ts';

/**
 * The ports a deployment runs on: a connector per platform (Telegram today; Discord or an HTTP
 * webhook would implement the same four things) and the sealer that keeps their secrets. The
 * rules (`service.ts`, `runtime.ts`, `relay.ts`) know platforms only through these.
 */

/** A platform's secrets as its owner gave them (`secrets.telegram`): in clear only in memory, between opening and use. */
export type PlatformSecrets = Record<string, string>;

/** The platform refused the secrets (a wrong or revoked bot token): `field` is the one at fault, `reason` is safe to show. */
export class SecretsRefused extends Error {
  override name = 'SecretsRefused';
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(reason);
  }
}

/** The platform could not be asked (network, its own failure): nothing was decided. */
export class PlatformUnreachable extends Error {
  override name = 'PlatformUnreachable';
}

/** A conversation on the platform: a Telegram chat, private or a group. */
export interface Conversation {
  id: string;
  title: string;
  kind: 'private' | 'group';
}

/** A message someone wrote to the deployed agent. */
export interface InboundMessage {
  /** The platform's id for the update: unique for the deployment, growing. */
  eventId: string;
  conversation: Conversation;
  /** The platform's id of the message, to answer it. */
  messageRef: string;
  sender: { ref: string; name: string };
  text: string;
}

/** A person pressed a button under one of the bot's messages (Telegram: a callback query). */
export interface InboundPress {
  /** The platform's id of the press, to answer it. */
  pressId: string;
  conversation: Conversation;
  /** The message the button was under. */
  messageRef: string;
  sender: { ref: string; name: string };
  /** The answer the button gives to a call that waits for approval; null for a button that gives none. */
  choice: { callId: string; approve: boolean } | null;
}

/** What a running receiver is given: where to resume, and where each batch goes. */
export interface ReceiveHooks {
  /** Where reading resumes (null: from what the platform still holds). */
  cursor: string | null;
  /**
   * Records a batch and the cursor past it (past updates that carried no message too), at once.
   * False: this instance may take no more (its lease is gone, the deployment was stopped); the
   * receiver then stops without confirming anything to the platform. Throws when the batch could
   * not be recorded (the rules have said why): the receiver reads it again after a growing pause.
   */
  take(messages: InboundMessage[], cursor: string): Promise<boolean>;
  /**
   * A press of a button, handed on once its batch was taken (never recorded: a press is answered
   * at once or not at all, and the person presses again).
   */
  press(press: InboundPress): Promise<void>;
  /** The platform refused the secrets: the receiver has stopped, for good. */
  revoked(reason: string): Promise<void>;
  /** A fault it will retry after `retryInMs` (network, the platform's rate limit): for the owner to see. */
  fault(reason: string, retryInMs: number): void;
  /** Reading works again after a fault. */
  healthy(): void;
}

/** A receiver under way: `stop` ends it (and its long poll) and waits for it. */
export interface Receiver {
  stop(): Promise<void>;
  /** Settles when it stops, by `stop`, by `take` answering false, or revoked. */
  ended: Promise<void>;
}

/** An answer being written in a conversation, shown as it grows as often as the platform allows. */
export interface AnswerOut {
  /** Shows the agent is at work (Telegram: typing) until the first text is shown. */
  typing(): void;
  /** The answer so far: shown when the platform's limits allow, the latest text winning. */
  show(text: string): void;
  /** Shows the whole answer, then the platform's ids of the messages holding it. Throws SecretsRefused when revoked. */
  finish(text: string): Promise<string[]>;
  /**
   * Stops what the answer still shows by itself (Telegram: typing renewed every few seconds):
   * an answer given up (the deployment stopped, its lease lost) must not look at work forever.
   * Harmless after `finish`.
   */
  close(): void;
}

/** A tool call that waits for its payer's answer, as a chat is told of it. */
export interface ApprovalAsk {
  callId: string;
  /** What the chat reads: the tool, its arguments, its price, when it counts as denied. */
  text: string;
  /** Whether the chat gets Approve / Deny buttons (an approver is set), or is only told. */
  buttons: boolean;
}

export interface Outbox {
  /**
   * An answer to `messageRef`. `refs` are the messages an earlier attempt already sent (edited,
   * never sent again); `sent` is told whenever the list grows, before anything else happens.
   */
  answer(to: { messageRef: string; refs: string[]; sent(refs: string[]): Promise<void> }): AnswerOut;
  /** A short message (why something was refused). */
  notice(text: string, replyTo: string): Promise<void>;
  /** Tells the chat a call waits for approval, with buttons when `ask.buttons`; the message's ref. */
  askApproval(ask: ApprovalAsk, replyTo: string): Promise<string>;
  /** The call of message `messageRef` was settled: it now reads `text` (null: as it did), with no buttons. */
  approvalSettled(messageRef: string, text: string | null): Promise<void>;
  /** Answers a press (Telegram shows `text` briefly above the chat). */
  answerPress(pressId: string, text: string): Promise<void>;
}

/** One platform, as the deployments' rules use it. */
export interface Connector {
  readonly platform: DeploymentPlatform;
  /**
   * Asks the platform whether the secrets open an account: its public name (a bot's `@username`)
   * and the platform's own id for it (a Telegram bot's id), the same whichever of its secrets
   * opened it (a token made anew in BotFather opens the same bot).
   */
  validate(secrets: PlatformSecrets): Promise<{ account: string; accountId: string }>;
  /** Starts reading what people write, until stopped. */
  start(secrets: PlatformSecrets, hooks: ReceiveHooks): Receiver;
  /** Where answers to one conversation go. */
  deliver(secrets: PlatformSecrets, conversation: Pick<Conversation, 'id' | 'kind'>): Outbox;
}

/** A sealed secret could not be opened: not sealed by any key this service has, or altered. */
export class SealBroken extends Error {
  override name = 'SealBroken';
}

/**
 * Authenticated encryption of secrets at rest, each bound to the row it belongs to (a sealed
 * value copied onto another row does not open). The key never leaves the adapter.
 */
export interface SecretSealer {
  /** Why nothing can be sealed or opened here (no key configured), or null. */
  readonly problem: string | null;
  seal(plain: string, boundTo: string): string;
  /** Throws SealBroken. */
  open(sealed: string, boundTo: string): string;
  /** Whether `sealed` is under the current key (else a reseal rewrites it). */
  isCurrent(sealed: string): boolean;
  /**
   * Why no key here can open `sealed` (there is none, or it was sealed under a key this service
   * does not have), or null when one may: whether it was altered shows only when it is opened.
   */
  cannotOpen(sealed: string): string | null;
  /** Makes a new current key, keeping the old ones for opening; throws with what to do instead when the key comes from settings. */
  rotate(): Promise<void>;
  /** Forgets every key but the current one, where the sealer keeps its keys itself. */
  forgetPrevious(): Promise<void>;
}

/** A sealer for compositions that run no deployments (a test's, a tool's): it says so when asked. */
export function noSealer(problem: string): SecretSealer {
  const refuse = (): never => {
    throw new Error(problem);
  };
  return {
    problem,
    seal: refuse,
    open: refuse,
    isCurrent: refuse,
    cannotOpen: () => problem,
    rotate: async () => refuse(),
    forgetPrevious: async () => refuse(),
  };
}

/** A reply as a chat is shown it, and whether it ended only because its process stopped (then it is asked again). */
export interface ChatReply {
  status: 'streaming' | 'complete' | 'failed' | 'cancelled' | 'interrupted';
  content: string;
  error: string | null;
  toolCalls: { status: string; result: unknown }[];
  interrupted: boolean;
}

/** A relayed prompt's session and its replies as saved (one: a deployment has one agent). */
export interface RelayedPrompt {
  sessionId: string;
  replies: ChatReply[];
}

/**
 * The replies as a deployment awaits them: the replies service behind it (composed in
 * `services.ts`, as `deployments` sits below `replies`).
 */
export interface Answers {
  /** How the prompt's replies stand; null when the prompt is not saved (or its session was deleted). */
  outcome(promptId: string): Promise<RelayedPrompt | null>;
  /**
   * Follows the prompt's replies until they end, showing their text as it grows (`onText`) when
   * followed from the prompt's start (`after`, its start event's seq; null: only their end is
   * awaited). 'gone': the prompt's session was deleted; 'stopped': `signal` stopped the wait.
   */
  awaitOutcome(wait: {
    sessionId: string;
    promptId: string;
    after: number | null;
    onText?: (text: string) => void;
    /** Each of its tool calls that waits for approval, or that ended (after `after`, or from when the wait started). */
    onToolCall?: (change: ToolCallChange) => void;
    signal: AbortSignal;
  }): Promise<RelayedPrompt | 'gone' | 'stopped'>;
}
