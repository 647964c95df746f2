/**
 * Telegram's Bot API over plain HTTP: `POST <base>/bot<token>/<method>` with a JSON body,
 * answered `{ok: true, result}` or `{ok: false, error_code, description, parameters}`. The token
 * is part of every URL, so nothing this module throws or returns carries a URL, and any text
 * that came back from elsewhere is scrubbed of the token before it is kept.
 */

/** Telegram answered with an error body. */
export class BotApiError extends Error {
  override name = 'BotApiError';
  constructor(
    readonly method: string,
    readonly code: number,
    readonly description: string,
    /** Seconds to wait, when Telegram says (429). */
    readonly retryAfterS?: number,
  ) {
    super(`Telegram refused ${method}: ${code} ${description}`);
  }
}

/** Telegram could not be reached, or answered something that is not the Bot API. */
export class BotApiUnreachable extends Error {
  override name = 'BotApiUnreachable';
}

/** The token was refused: wrong, or revoked by its owner in BotFather. */
export const isRefusedToken = (e: unknown) => e instanceof BotApiError && (e.code === 401 || e.code === 404);

/** What Telegram sends us, as far as we read it. */
export interface TelegramUser {
  id: number;
  is_bot: boolean;
  first_name: string;
  last_name?: string;
  username?: string;
}
export interface TelegramChat {
  id: number;
  type: 'private' | 'group' | 'supergroup' | 'channel';
  title?: string;
  first_name?: string;
  last_name?: string;
  username?: string;
}
export interface TelegramMessage {
  message_id: number;
  chat: TelegramChat;
  from?: TelegramUser;
  text?: string;
}
/** A press of an inline keyboard's button. */
export interface TelegramCallbackQuery {
  id: string;
  from: TelegramUser;
  /** The message the button was under (absent when too old for Telegram to send). */
  message?: TelegramMessage;
  data?: string;
}
export interface TelegramUpdate {
  update_id: number;
  message?: TelegramMessage;
  callback_query?: TelegramCallbackQuery;
}

export type BotApi = ReturnType<typeof botApi>;

/** Why a call that never reached Telegram failed, in words that name no URL. */
function networkReason(e: unknown): string {
  const cause = (e as { cause?: { code?: string; message?: string } }).cause;
  if ((e as Error).name === 'TimeoutError') return 'timed out';
  return cause?.code ?? (e as Error).name ?? 'network error';
}

export function botApi(baseUrl: string, token: string) {
  const scrub = (text: string) => (token ? text.split(token).join('<token>') : text);

  /** Calls `method`; `signal` aborts it (the AbortError is passed on as is). */
  async function call<T>(method: string, params: object, options: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<T> {
    const signals = [AbortSignal.timeout(options.timeoutMs ?? 15_000), ...(options.signal ? [options.signal] : [])];
    let response: Response;
    let body: { ok?: boolean; result?: T; error_code?: number; description?: string; parameters?: { retry_after?: number } };
    try {
      response = await fetch(`${baseUrl}/bot${token}/${method}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(params),
        signal: AbortSignal.any(signals),
      });
      body = (await response.json()) as typeof body;
    } catch (e) {
      if (options.signal?.aborted) throw options.signal.reason;
      throw new BotApiUnreachable(`Telegram could not be reached (${method}: ${scrub(networkReason(e))})`);
    }
    if (body?.ok === true) return body.result as T;
    if (typeof body?.error_code !== 'number')
      throw new BotApiUnreachable(`Telegram answered ${method} with status ${response.status} and no Bot API body`);
    const retryAfter = body.parameters?.retry_after;
    throw new BotApiError(
      method,
      body.error_code,
      scrub(String(body.description ?? '')).slice(0, 200),
      typeof retryAfter === 'number' && retryAfter >= 0 ? retryAfter : undefined,
    );
  }

  return { call };
}
