import type { SessionEvent, SessionEventPayload } from './events.ts';

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

export type BusItem = SessionEvent | StreamEnd;
export const isStreamEnd = (item: BusItem): item is StreamEnd => 'end' in item;

export interface BusSubscription extends AsyncIterableIterator<BusItem> {
  /** Stops delivery and frees the subscription (also what `return()` does). */
  close(): void;
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
  /** `deleted`: the session is gone, so nothing is saved. */
  reason: 'cancelled' | 'deleted';
}

/**
 * The one publish/replay interface for live events. The in-process implementation serves a
 * single instance; a shared implementation (Redis) slots in behind the same interface.
 */
export interface EventBus {
  /** Numbers the event (seq grows per session) and delivers it to every subscriber. */
  publish(sessionId: string, event: SessionEventPayload): Promise<SessionEvent>;
  subscribe(sessionId: string, options?: SubscribeOptions): BusSubscription;
  /**
   * The session's seq now: a subscription with `after` set to it misses nothing published from
   * the moment this answers (what a watch takes before it checks access).
   */
  position(sessionId: string): Promise<number>;
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
  /** For metrics and tests: subscriptions open right now. */
  subscriberCount(): number;
}
