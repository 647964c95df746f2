import type { WebhookEventInput } from './events.ts';

/** One try's request: the adapter checks the address again, follows no redirect and reads at most `maxAnswerBytes`. */
export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  maxAnswerBytes: number;
  /** Aborted when the instance gives the try up (a shutdown): nothing more is read. */
  signal?: AbortSignal;
}

/** How a try went: the receiver's answer, or why there was none (refused, timed out, an address refused). */
export type WebhookResponse =
  | { status: number; answer: string; durationMs: number }
  | { status?: undefined; error: string; durationMs: number };

/** Calls a receiver (`src/outbound/`): the domain opens no connection itself. */
export interface WebhookSender {
  post(request: WebhookRequest): Promise<WebhookResponse>;
}

/**
 * Seals and opens secrets for one row, as deployments' secrets are (`src/secrets/`): the same
 * sealer, handed in by the composition.
 */
export interface Sealer {
  readonly problem: string | null;
  seal(plain: string, boundTo: string): string;
  open(sealed: string, boundTo: string): string;
}

/**
 * Renders an event's `data` for its receivers: the ids the change recorded, with the objects they
 * name as REST's `GET` shows them to the endpoint's owner. REST implements it (`src/rest/`), the
 * composition hands it to the deliveries; it runs once per event, before its first try, and its
 * result is stored, so every try and redelivery sends the same bytes.
 */
export interface WebhookPayloads {
  render(event: WebhookEventInput): Promise<Record<string, unknown>>;
}
