import type { Conversation, InboundMessage, InboundPress, ReceiveHooks, Receiver } from '../../domain/deployments/ports.ts';
import {
  type BotApi,
  BotApiError,
  type TelegramCallbackQuery,
  type TelegramChat,
  type TelegramMessage,
  type TelegramUpdate,
  isRefusedToken,
} from './bot-api.ts';
import { pressData } from './outbox.ts';
import { retryDelay, sleep } from '../../domain/deployments/waits.ts';

/** What people see of a Telegram user: their name, else their @username. */
export function nameOf(user: { first_name?: string; last_name?: string; username?: string }): string {
  const name = [user.first_name, user.last_name]
    .filter(Boolean)
    .join(' ')
    .replace(/[\p{Cc}\p{Cf}]/gu, '')
    .trim();
  return (name || (user.username ? `@${user.username}` : 'Telegram user')).slice(0, 64);
}

const conversationOf = (chat: TelegramChat): Conversation => ({
  id: String(chat.id),
  title: chat.type === 'private' ? nameOf(chat) : (chat.title ?? 'Telegram group').slice(0, 128),
  kind: chat.type === 'private' ? 'private' : 'group',
});

/** A message people wrote, as the deployments' rules take it; null for what is not one (a bot's, no text). */
function inbound(updateId: number, m: TelegramMessage): InboundMessage | null {
  if (!m.from || m.from.is_bot || typeof m.text !== 'string' || !m.text.trim()) return null;
  return {
    eventId: String(updateId),
    conversation: conversationOf(m.chat),
    messageRef: String(m.message_id),
    sender: { ref: String(m.from.id), name: nameOf(m.from) },
    text: m.text,
  };
}

/** A press of a button under a message of the bot's (null when Telegram no longer says which), with the answer its data names. */
function pressOf(q: TelegramCallbackQuery): InboundPress | null {
  if (!q.message) return null;
  return {
    pressId: q.id,
    conversation: conversationOf(q.message.chat),
    messageRef: String(q.message.message_id),
    sender: { ref: String(q.from.id), name: nameOf(q.from) },
    choice: pressData.read(q.data),
  };
}

/**
 * Long-polls `getUpdates` (messages, and presses of the bot's buttons) from the cursor (the next `update_id`). Each batch is handed to `take`
 * with the offset past it before the next poll, which is what confirms the batch to Telegram:
 * a batch that could not be recorded (`take` threw) is asked for again after a growing pause.
 * A refused token ends it; Telegram's 429 waits `retry_after`; anything else (network, 5xx, 409
 * while another poll is still open) is retried after a growing pause, never at once.
 */
export function startReceiver(api: BotApi, hooks: ReceiveHooks, pollTimeoutS: number): Receiver {
  const controller = new AbortController();
  const { signal } = controller;

  async function poll() {
    let cursor = hooks.cursor;
    let failures = 0;
    // Batches not recorded in a row: what went wrong was told by `take`, the platform is not at fault.
    let unrecorded = 0;
    // Apart from `failures`: a 429 is a fault the owner sees, but its wait is Telegram's, not a backoff step.
    let faulted = false;
    while (!signal.aborted) {
      try {
        const updates = await api.call<TelegramUpdate[]>(
          'getUpdates',
          { ...(cursor ? { offset: Number(cursor) } : {}), timeout: pollTimeoutS, allowed_updates: ['message', 'callback_query'] },
          { signal, timeoutMs: (pollTimeoutS + 10) * 1000 },
        );
        if (faulted) hooks.healthy();
        faulted = false;
        failures = 0;
        if (!updates.length) continue;
        const next = String(Math.max(...updates.map((u) => u.update_id)) + 1);
        const messages = updates.flatMap((u) => (u.message ? (inbound(u.update_id, u.message) ?? []) : []));
        let taken: boolean;
        try {
          taken = await hooks.take(messages, next);
        } catch {
          await sleep(retryDelay(++unrecorded), signal);
          continue;
        }
        if (!taken) return;
        unrecorded = 0;
        cursor = next;
        // Each press is answered on its own, while polling goes on.
        for (const u of updates) {
          const press = u.callback_query ? pressOf(u.callback_query) : null;
          if (press) void hooks.press(press).catch(() => {});
        }
      } catch (e) {
        if (signal.aborted) return;
        if (isRefusedToken(e)) {
          await hooks.revoked('Telegram refused the bot token (it was revoked or changed)');
          return;
        }
        const told = e instanceof BotApiError && e.retryAfterS !== undefined ? e.retryAfterS * 1000 : undefined;
        const wait = told ?? retryDelay(++failures);
        faulted = true;
        hooks.fault(e instanceof Error ? e.message : 'Telegram could not be read', wait);
        await sleep(wait, signal);
      }
    }
  }

  const ended = poll();
  return {
    ended,
    async stop() {
      controller.abort();
      await ended;
    },
  };
}
