import type { DeploymentsConfig } from '../../config.ts';
import { type Connector, PlatformUnreachable, SecretsRefused } from '../../domain/deployments/ports.ts';
import { BotApiError, type TelegramUser, botApi, isRefusedToken } from './bot-api.ts';
import { CHAT_GAP_MS, type Pacer, pacer, telegramOutbox } from './outbox.ts';
import { startReceiver } from './receiver.ts';

/** A bot token as BotFather gives it: the bot's id, a colon, then 35 characters (checked before it goes into a URL). */
const TOKEN = /^\d{1,20}:[A-Za-z0-9_-]{30,100}$/;
const TOKEN_FIELD = 'secrets.telegram.token';
/** Chats whose pace is remembered; the oldest are forgotten past this (their gap is long over). */
const PACED_CHATS = 10_000;

/** The token of a deployment's secrets, checked for its form. */
function tokenOf(secrets: Record<string, string>): string {
  const token = secrets.token ?? '';
  if (!TOKEN.test(token)) throw new SecretsRefused(TOKEN_FIELD, 'is not a Telegram bot token (digits, a colon, then the secret part)');
  return token;
}

/**
 * Telegram behind the deployments' connector port: `validate` asks `getMe`, `start` long-polls
 * `getUpdates`, `deliver` answers with `sendMessage` and grows the answer with `editMessageText`
 * at the pace the Bot API allows per chat (shared by everything this process sends to a chat).
 */
export function telegramConnector(config: DeploymentsConfig['telegram']): Connector {
  const paces = new Map<string, Pacer>();
  const paceOf = (botId: string, chatId: string, kind: 'private' | 'group') => {
    const key = `${botId} ${chatId}`;
    let pace = paces.get(key);
    if (pace) paces.delete(key);
    else pace = pacer(CHAT_GAP_MS[kind]);
    paces.set(key, pace);
    for (const old of paces.keys()) {
      if (paces.size <= PACED_CHATS) break;
      paces.delete(old);
    }
    return pace;
  };

  return {
    platform: 'telegram',

    async validate(secrets) {
      const api = botApi(config.apiUrl, tokenOf(secrets));
      try {
        const me = await api.call<TelegramUser>('getMe', {});
        return { account: me.username ? `@${me.username}` : me.first_name, accountId: String(me.id) };
      } catch (e) {
        if (isRefusedToken(e)) throw new SecretsRefused(TOKEN_FIELD, 'Telegram refused this bot token (getMe answered Unauthorized)');
        if (e instanceof BotApiError && e.retryAfterS !== undefined)
          throw new PlatformUnreachable(`Telegram asks to wait ${e.retryAfterS} s before checking the token again`);
        throw new PlatformUnreachable('Telegram could not be reached to check the bot token; nothing was saved, try again');
      }
    },

    start(secrets, hooks) {
      return startReceiver(botApi(config.apiUrl, tokenOf(secrets)), hooks, config.pollTimeoutS);
    },

    deliver(secrets, conversation) {
      const token = tokenOf(secrets);
      return telegramOutbox(
        botApi(config.apiUrl, token),
        conversation.id,
        paceOf(token.split(':')[0]!, conversation.id, conversation.kind),
      );
    },
  };
}
