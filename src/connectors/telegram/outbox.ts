import { type AnswerOut, type Outbox, SecretsRefused } from '../../domain/deployments/ports.ts';
import { type BotApi, BotApiError, type TelegramMessage, isRefusedToken } from './bot-api.ts';
import { retryDelay, sleep } from '../../domain/deployments/waits.ts';

/** The longest text one Telegram message holds; a longer answer goes on in the next message. */
export const MESSAGE_LIMIT = 4096;
/**
 * What the Bot API allows per chat: about a message a second in a private chat, twenty a minute
 * in a group (edits count as messages). Answers grow by edits no faster than this.
 */
export const CHAT_GAP_MS = { private: 1_000, group: 3_000 } as const;
/** Telegram shows "typing…" for five seconds: renewed a little before it fades. */
const TYPING_EVERY_MS = 4_500;
/** Tries of an answer's last text before it is given up (429 waits are as Telegram says). */
const FINISH_TRIES = 6;

const REVOKED = 'Telegram refused the bot token (it was revoked or changed)';

/**
 * The times a chat may next be sent to: reservations, so writers of one chat go one after another.
 * Telegram counts a call when it arrives, and a call can be held up on its way (a busy process, a
 * slow network) longer than the one after it, so the gap runs from when the last call ended.
 */
export function pacer(gapMs: number) {
  let next = 0;
  return {
    async send<T>(call: () => Promise<T>): Promise<T> {
      const now = Date.now();
      const at = Math.max(now, next);
      next = at + gapMs;
      if (at > now) await sleep(at - now);
      try {
        return await call();
      } finally {
        next = Math.max(next, Date.now() + gapMs);
      }
    },
    /** Telegram asked to wait (429): nothing goes to this chat before then. */
    defer(ms: number) {
      next = Math.max(next, Date.now() + ms);
    },
  };
}
export type Pacer = ReturnType<typeof pacer>;

/** Splits text into messages Telegram takes, at a line or a space where one is near the limit. */
export function messageParts(text: string): string[] {
  const parts: string[] = [];
  let rest = text;
  while (rest.length > MESSAGE_LIMIT) {
    const window = rest.slice(0, MESSAGE_LIMIT);
    const cut = Math.max(window.lastIndexOf('\n'), window.lastIndexOf(' '));
    const at = cut > MESSAGE_LIMIT / 2 ? cut + 1 : MESSAGE_LIMIT;
    parts.push(rest.slice(0, at));
    rest = rest.slice(at);
  }
  parts.push(rest);
  return parts.filter((p) => p.trim() !== '');
}

/**
 * What an Approve or Deny button carries: the call it answers, no more (64 bytes at most). A
 * press is taken only from the deployment's approver, and only for a call of the session of the
 * chat it was pressed in, so data made up by a client names nothing else it could settle.
 */
export const pressData = {
  approve: (callId: string) => `approve:${callId}`,
  deny: (callId: string) => `deny:${callId}`,
  /** The answer a button's data gives; null for data no button of ours carries. */
  read(data: string | undefined): { callId: string; approve: boolean } | null {
    const [, verb, callId] = /^(approve|deny):([\w-]{1,60})$/.exec(data ?? '') ?? [];
    return verb && callId ? { callId, approve: verb === 'approve' } : null;
  },
};

const notModified = (e: unknown) => e instanceof BotApiError && e.code === 400 && /not modified/i.test(e.description);
const editGone = (e: unknown) =>
  e instanceof BotApiError && e.code === 400 && /message to edit not found|message can't be edited/i.test(e.description);

/** Where answers to one Telegram chat go, paced by `pace` (shared by everything sent to that chat). */
export function telegramOutbox(api: BotApi, chatId: string, pace: Pacer): Outbox {
  const chat_id = Number(chatId);
  const reply = (messageRef: string) => ({ reply_parameters: { message_id: Number(messageRef), allow_sending_without_reply: true } });

  return {
    answer: (to) => answerOut(api, chat_id, pace, to, reply(to.messageRef)),

    async askApproval({ callId, text, buttons }, replyTo) {
      const keyboard = buttons
        ? {
            reply_markup: {
              inline_keyboard: [
                [
                  { text: 'Approve', callback_data: pressData.approve(callId) },
                  { text: 'Deny', callback_data: pressData.deny(callId) },
                ],
              ],
            },
          }
        : {};
      const sent = await pace.send(() =>
        api.call<TelegramMessage>('sendMessage', { chat_id, text: text.slice(0, MESSAGE_LIMIT), ...keyboard, ...reply(replyTo) }),
      );
      return String(sent.message_id);
    },

    async approvalSettled(messageRef, text) {
      const message_id = Number(messageRef);
      try {
        // An edit with no reply_markup leaves the message with no buttons.
        await pace.send(() =>
          text === null
            ? api.call('editMessageReplyMarkup', { chat_id, message_id })
            : api.call('editMessageText', { chat_id, message_id, text: text.slice(0, MESSAGE_LIMIT) }),
        );
      } catch (e) {
        // Settled twice over (a press, and the reply that went on), or deleted by the person.
        if (!notModified(e) && !editGone(e)) throw e;
      }
    },

    async answerPress(pressId, text) {
      await api.call('answerCallbackQuery', { callback_query_id: pressId, text: text.slice(0, 200) });
    },

    async notice(text, replyTo) {
      for (let attempt = 1; ; attempt++) {
        try {
          await pace.send(() => api.call('sendMessage', { chat_id, text, ...reply(replyTo) }));
          return;
        } catch (e) {
          if (isRefusedToken(e)) throw new SecretsRefused('secrets.telegram.token', REVOKED);
          if (attempt >= FINISH_TRIES) throw e;
          if (e instanceof BotApiError && e.retryAfterS === undefined) throw e;
          await waitAfter(e, attempt, pace);
        }
      }
    },
  };
}

/** Waits as Telegram asked (429), or a growing pause after a network failure. */
async function waitAfter(e: unknown, attempt: number, pace: Pacer) {
  const told = e instanceof BotApiError ? e.retryAfterS : undefined;
  const ms = told !== undefined ? told * 1000 : retryDelay(attempt);
  pace.defer(ms);
  await sleep(ms);
}

function answerOut(api: BotApi, chat_id: number, pace: Pacer, to: Parameters<Outbox['answer']>[0], replyTo: object): AnswerOut {
  const refs = [...to.refs];
  /** The text each message holds now; unknown for an earlier attempt's (edited once to be sure). */
  const shown: (string | null)[] = refs.map(() => null);
  let latest: string | null = null;
  let pumping: Promise<void> | null = null;
  let revoked = false;
  let typingTimer: NodeJS.Timeout | undefined;
  let texted = refs.length > 0;

  const stopTyping = () => {
    clearInterval(typingTimer);
    typingTimer = undefined;
  };
  const sendTyping = () => void api.call('sendChatAction', { chat_id, action: 'typing' }).catch(() => {});

  /** Makes message `i` hold `part`: an edit, or a new message where there is none (or it was deleted). */
  async function show(i: number, part: string) {
    if (i < refs.length) {
      try {
        await api.call('editMessageText', { chat_id, message_id: Number(refs[i]), text: part });
      } catch (e) {
        if (!notModified(e) && !editGone(e)) throw e;
        if (editGone(e)) {
          // The person deleted it: the answer carries on in a new message.
          const sent = await api.call<TelegramMessage>('sendMessage', { chat_id, text: part, ...(i === 0 ? replyTo : {}) });
          refs[i] = String(sent.message_id);
          await to.sent([...refs]);
        }
      }
    } else {
      const sent = await api.call<TelegramMessage>('sendMessage', { chat_id, text: part, ...(i === 0 ? replyTo : {}) });
      refs.push(String(sent.message_id));
      shown.push(null);
      await to.sent([...refs]);
    }
  }

  /** Makes the messages hold `text`: edits those that differ, sends the parts that are new. */
  async function render(text: string) {
    const parts = messageParts(text);
    for (const [i, part] of parts.entries()) {
      if (i < refs.length && shown[i] === part) continue;
      await pace.send(() => show(i, part));
      shown[i] = part;
      texted = true;
      stopTyping();
    }
  }

  /** Shows the latest text as often as the chat allows; a text overtaken while waiting is never sent. */
  async function pump() {
    while (latest !== null && !revoked) {
      const text = latest;
      latest = null;
      try {
        await render(text);
      } catch (e) {
        if (isRefusedToken(e)) revoked = true;
        else if (e instanceof BotApiError && e.retryAfterS !== undefined) pace.defer(e.retryAfterS * 1000);
        // Anything else: the next text, or the finish, tries again.
      }
    }
  }

  return {
    typing() {
      if (texted || typingTimer) return;
      sendTyping();
      typingTimer = setInterval(sendTyping, TYPING_EVERY_MS);
      typingTimer.unref();
    },

    show(text) {
      if (!messageParts(text).length) return;
      latest = text;
      pumping ??= pump().finally(() => (pumping = null));
    },

    close() {
      latest = null;
      stopTyping();
    },

    async finish(text) {
      latest = null;
      await pumping;
      stopTyping();
      for (let attempt = 1; ; attempt++) {
        if (revoked) throw new SecretsRefused('secrets.telegram.token', REVOKED);
        try {
          await render(text);
          return [...refs];
        } catch (e) {
          if (isRefusedToken(e)) revoked = true;
          else if (attempt >= FINISH_TRIES || (e instanceof BotApiError && e.retryAfterS === undefined)) throw e;
          else await waitAfter(e, attempt, pace);
        }
      }
    },
  };
}
