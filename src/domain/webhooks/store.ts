import type { WebhookEventInput, WebhookEventType } from './events.ts';

/** An endpoint as its owner sees it: never its secret. */
export interface WebhookView {
  id: string;
  userId: string;
  url: string;
  description: string;
  eventTypes: string[];
  enabled: boolean;
  /** Why the service turned it off, or null. */
  disabledReason: string | null;
  /** When the service turned it off, or null. */
  disabledAt: Date | null;
  failingSince: Date | null;
  /** Until when the secret before the last rotation still signs, or null. */
  previousSecretUntil: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

/** One try of a delivery, as the log keeps it. */
export interface AttemptView {
  /** 1 for the delivery's first try. */
  attempt: number;
  at: Date;
  statusCode: number | null;
  durationMs: number;
  /** The first bytes of the answer. */
  answer: string | null;
  error: string | null;
  /** When the next try was due after this one; null when it was the last. */
  nextAttemptAt: Date | null;
}

/** One event bound for one endpoint: its last try, and every try so far. */
export interface DeliveryView {
  id: string;
  webhookId: string;
  eventId: string;
  eventType: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastAttemptAt: Date | null;
  statusCode: number | null;
  durationMs: number | null;
  /** The first bytes of the last answer. */
  answer: string | null;
  error: string | null;
  /** When it is tried next; null once delivered or given up. */
  nextAttemptAt: Date | null;
  createdAt: Date;
  /** Every try so far, first first. */
  tries: AttemptView[];
}

/** The secrets that sign an endpoint's deliveries, sealed. */
export interface SealedSecrets {
  secret: string;
  previousSecret: string | null;
  previousUntil: Date | null;
}

/** Every statement the endpoints' rules need. */
export interface WebhookStore {
  count(userId: string): Promise<number>;
  /** Made with its sealed secret: the id is chosen first, since the seal is bound to it. */
  create(row: {
    id: string;
    userId: string;
    url: string;
    description: string;
    eventTypes: string[];
    enabled: boolean;
    secret: string;
  }): Promise<WebhookView>;
  list(userId: string): Promise<WebhookView[]>;
  byId(id: string): Promise<WebhookView | null>;
  /** Turning it on again clears why it was turned off, and its failures. */
  update(id: string, changes: { url?: string; description?: string; eventTypes?: string[]; enabled?: boolean }): Promise<WebhookView>;
  remove(id: string): Promise<void>;
  /** The secret that signs now, sealed. */
  sealedSecret(id: string): Promise<string | null>;
  rotate(id: string, secrets: SealedSecrets): Promise<WebhookView>;
  /** Its deliveries, newest first, before the delivery `before` when given. */
  deliveries(webhookId: string, page: { limit: number; before?: string }): Promise<DeliveryView[]>;
  delivery(webhookId: string, deliveryId: string): Promise<DeliveryView | null>;
  /** A new delivery of the same event (the same `webhook-id`) to the same endpoint, due at `at`. */
  redeliver(webhookId: string, eventId: string, at: Date): Promise<DeliveryView>;
  /** Records `event` for this endpoint alone (a test), whatever types it lists; the delivery. */
  recordFor(webhookId: string, event: WebhookEventInput, at: Date): Promise<DeliveryView>;
}

/** A delivery taken for one try: what to send, where, signed with what. */
export interface ClaimedDelivery {
  id: string;
  webhookId: string;
  userId: string;
  url: string;
  eventId: string;
  eventType: WebhookEventType;
  body: string;
  /** Whether `body` carries its objects as REST shows them; false until its first try renders them. */
  rendered: boolean;
  attempts: number;
  secrets: SealedSecrets;
  /** The endpoint was turned off since the event: nothing is sent. */
  endpointOff: boolean;
  /** The endpoint's deliveries were failing when the try was taken: a success clears it. */
  endpointFailing: boolean;
}

/** How a try ended, to be stored. */
export interface TryOutcome {
  at: Date;
  statusCode: number | null;
  durationMs: number;
  answer: string | null;
  error: string | null;
  delivered: boolean;
  /** The next try, or null: delivered, or given up. */
  nextAttemptAt: Date | null;
}

/** The statements the delivering side (the jobs) needs. */
export interface DeliveryStore {
  /**
   * Deliveries due by `now` that no job holds (none sent, or sent before `staleBefore` and no try
   * holds them now), oldest first, each marked sent at `now` in the same statement: two instances
   * sweeping together take different ones.
   */
  takeDue(now: Date, staleBefore: Date, limit: number): Promise<{ id: string; webhookId: string }[]>;
  /** Takes the delivery's next try until `until`, if it is due and no one holds it; null otherwise. */
  claim(id: string, now: Date, until: Date): Promise<ClaimedDelivery | null>;
  /**
   * When a pending delivery's next try can be taken: when it is due, or when the claim of a try
   * under way (or of an instance that died during one) lapses, whichever is later; null once it
   * is pending no more.
   */
  dueAt(id: string): Promise<Date | null>;
  /** Puts a claimed try back untried, due at `at` (its endpoint had too many under way here). */
  release(id: string, attempts: number, at: Date): Promise<void>;
  /**
   * Stores a try's outcome (only if the try is still the one claimed, `attempts` unchanged) with
   * its row in the log, and the endpoint's state: failing since when, turned off (with `disableReason`) once failing
   * before `disableBefore`. Whether the endpoint was turned off now.
   */
  settle(claimed: ClaimedDelivery, outcome: TryOutcome, disable: { before: Date; reason: string }): Promise<{ disabled: boolean }>;
  /**
   * Stores an event's rendered body, unless another try rendered it first; the body stored, which
   * every try of the event sends.
   */
  saveRendered(eventId: string, body: string): Promise<string>;
  /** A delivery bound for an endpoint that was turned off: given up without a try. */
  dropOff(id: string, attempts: number, at: Date): Promise<void>;
}

export type { WebhookEventInput };
