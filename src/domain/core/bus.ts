import type { SessionEvent, SessionEventPayload } from './events.ts';
import type { FeedEvent, FeedEventPayload } from './feed-events.ts';

/** Why a bus ends a subscription early (watches add their own reasons: `watchEndCodes`). */
export const streamEndCodes = ['SLOW_CONSUMER', 'EVENTS_EXPIRED', 'SHUTTING_DOWN'] as const;

/**
 * Why a subscription ended before its consumer let go. The consumer may resume from `lastSeq`
 * with `after` (GraphQL) or `Last-Event-ID` (SSE) where `resumable`.
 */
export interface StreamEnd {
  end: true;
  code: (typeof streamEndCodes)[number];
  reason: string;
  lastSeq: number | null;
}

/**
 * What the bus adds to every event it carries, whatever its channel: its number there (`seq`
 * only grows), its time, and where numbers were skipped (an instance that numbered the channel
 * went away) the seq it follows. Watchers carry on across a skip; clients never see `prev`.
 */
export interface Numbered {
  seq: number;
  at: string;
  prev?: number;
}

export type BusItem<E extends Numbered = SessionEvent> = E | StreamEnd;
export const isStreamEnd = <E extends Numbered>(item: BusItem<E>): item is StreamEnd => 'end' in item;

export interface BusSubscription<E extends Numbered = SessionEvent> extends AsyncIterableIterator<BusItem<E>> {
  /** Stops delivery and frees the subscription (also what `return()` does). */
  close(): void;
  /**
   * The next event if it is here now; null when there is none yet (then `woken`), undefined when
   * only `next()` can tell. A reader of many events takes them so, without a promise each; a
   * subscription without it is read by `next()` alone.
   */
  poll?(): E | null | undefined;
  /** Settles when something may have come: an event, an end, a close (asked only after `poll` said null). */
  woken?(): Promise<void>;
}

export interface SubscribeOptions {
  /**
   * Replay every retained event with a greater seq first, then continue live. Without it the
   * subscription starts with the next event published. When events after `after` are no longer
   * retained, the subscription yields an EVENTS_EXPIRED end at once.
   */
  after?: number;
}

/** Stop the replies being written in a session (one prompt's, or all), wherever they run. */
export interface CancelRequest {
  sessionId: string;
  promptId?: string;
  /**
   * `deleted`: the session is gone, so nothing is saved. `interrupted` and `rolled_back`: a newer
   * prompt asked it (the reply's row says so too, so a request that arrives early is not lost).
   */
  reason: 'cancelled' | 'deleted' | 'interrupted' | 'rolled_back';
}

/**
 * Channels of one kind (sessions, users' feeds), each named by an id: every channel has its own
 * numbering, replay log and watchers, and the same guarantees whatever its kind.
 */
export interface EventChannels<P, E extends Numbered> {
  /** Numbers the event (seq grows per channel) and delivers it to every subscriber. */
  publish(id: string, event: P): Promise<E>;
  subscribe(id: string, options?: SubscribeOptions): BusSubscription<E>;
  /**
   * The channel's seq now: a subscription with `after` set to it misses nothing published from
   * the moment this answers (what a watch takes before it checks access).
   */
  position(id: string): Promise<number>;
}

/**
 * The one publish/replay interface for live events. The in-process implementation serves a
 * single instance; a shared implementation (Redis) slots in behind the same interface. Its own
 * channels are sessions'; `feeds` are users' (`feed-events.ts`), carried by the same machinery.
 */
export interface EventBus extends EventChannels<SessionEventPayload, SessionEvent> {
  /** Each user's own feed of changes to their triggers, tasks and deployments, named by the user's id. */
  readonly feeds: EventChannels<FeedEventPayload, FeedEvent>;
  /** Tells every connection authenticated with this key to close. */
  revokeKey(keyId: string): Promise<void>;
  onKeyRevoked(listener: (keyId: string) => void): () => void;
  /** Tells every instance (this one included) to stop these replies. */
  cancelReplies(request: CancelRequest): Promise<void>;
  onCancelReplies(listener: (request: CancelRequest) => void): () => void;
  /** Ends every subscription with SHUTTING_DOWN (clients reconnect elsewhere) and stops. */
  close(): Promise<void>;
  /** For the start-up line and /healthz: where events go, and whether that is reachable now. */
  describe(): Promise<{ events: string; reachable: boolean }>;
  /** For metrics and tests: subscriptions open right now, of every kind. */
  subscriberCount(): number;
}
