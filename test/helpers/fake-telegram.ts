import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { changes } from './until.ts';

/**
 * A fake of Telegram's Bot API speaking its wire format, for deployments to run against over
 * real HTTP: `POST /bot<token>/<method>` with JSON (or form or query) parameters, answered
 * `{ok: true, result}` or `{ok: false, error_code, description, parameters?: {retry_after}}`.
 * `getMe`; `getUpdates` long-polling with `offset` (confirming what lies below it), `limit` and
 * `timeout`, a second concurrent poll of one bot ending the first with 409 as Telegram does;
 * `sendMessage` (with `reply_parameters` and an inline keyboard in `reply_markup`),
 * `editMessageText` ("message is not modified" when nothing changes; the keyboard is the one
 * given, none when none is), `editMessageReplyMarkup`, `answerCallbackQuery`, `sendChatAction`.
 * `allowed_updates` of a poll holds until the next poll that gives it, as on Telegram: a press
 * of a button reaches the bot only when it asked for `callback_query`. Tests write as people
 * (`message`), press buttons (`press`), revoke tokens, inject errors (`failNext`), take the
 * network down, and read what the bot did.
 */

export interface TgUser {
  id: number;
  first_name: string;
  last_name?: string;
  username?: string;
}
export interface TgChat {
  id: number;
  type: 'private' | 'group' | 'supergroup';
  title?: string;
  first_name?: string;
  last_name?: string;
}
export interface BotMessage {
  message_id: number;
  chatId: number;
  text: string;
  replyTo: number | null;
  /** When it was sent, then when each edit was made (ms). */
  times: number[];
  /** Its texts, first to last. */
  texts: string[];
  /** Its inline keyboard now, as the bot last set it (null: none). */
  keyboard: InlineButton[][] | null;
}
/** A button of an inline keyboard, as the Bot API takes it (only callback buttons and links here). */
export interface InlineButton {
  text: string;
  callback_data?: string;
  url?: string;
}
/** A press of a button, and how the bot answered it (null: not yet). */
export interface Press {
  id: string;
  chatId: number;
  messageId: number;
  from: TgUser;
  data: string;
  answer: { text: string | null; show_alert: boolean } | null;
}
export interface RecordedCall {
  token: string;
  method: string;
  params: Record<string, any>;
  /** When the request arrived (ms). */
  at: number;
  /** What was answered: ok, an error code, or 0 for a connection cut (the network down). */
  answer: 'ok' | number;
}
interface Update {
  update_id: number;
  message?: { message_id: number; date: number; chat: TgChat; from: TgUser & { is_bot: false }; text: string };
  callback_query?: { id: string; from: TgUser & { is_bot: false }; message: object; chat_instance: string; data: string };
}
interface Poll {
  respond(status: number, body: object): void;
  offset: number;
  limit: number;
  timer: NodeJS.Timeout;
}
interface Bot {
  token: string;
  user: { id: number; is_bot: true; first_name: string; username: string };
  revoked: boolean;
  updates: Update[];
  poll: Poll | null;
  polling: number;
  maxPolling: number;
  conflicts: number;
  faults: { method: string; status: number; description: string; retryAfter?: number }[];
  /** The update types its polls asked for (Telegram remembers the last list given); null: the default (all but a few). */
  allowed: string[] | null;
}

const ok = (result: unknown) => ({ ok: true, result });
const fail = (error_code: number, description: string, retryAfter?: number) => ({
  ok: false,
  error_code,
  description,
  ...(retryAfter !== undefined ? { parameters: { retry_after: retryAfter } } : {}),
});

/** Keyboards as the Bot API checks them: rows of buttons, each with its text and one action. */
function keyboardOf(raw: unknown): { keyboard: InlineButton[][] | null } | { error: string } {
  let markup: any = raw;
  if (typeof raw === 'string') {
    try {
      markup = JSON.parse(raw);
    } catch {
      return { error: "can't parse reply keyboard markup JSON object" };
    }
  }
  if (!markup || typeof markup !== 'object' || !Array.isArray(markup.inline_keyboard))
    return { error: "can't parse reply keyboard markup JSON object" };
  for (const row of markup.inline_keyboard) {
    if (!Array.isArray(row)) return { error: "can't parse reply keyboard markup JSON object" };
    for (const b of row) {
      if (typeof b?.text !== 'string' || !b.text)
        return { error: "can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard" };
      const data = b.callback_data;
      if (data === undefined && typeof b.url !== 'string')
        return { error: "can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard" };
      if (data !== undefined && (typeof data !== 'string' || Buffer.byteLength(data) < 1 || Buffer.byteLength(data) > 64))
        return { error: 'BUTTON_DATA_INVALID' };
    }
  }
  const rows = (markup.inline_keyboard as InlineButton[][]).filter((r) => r.length);
  return { keyboard: rows.length ? rows.map((r) => r.map((b) => ({ ...b }))) : null };
}

const sameKeyboard = (a: InlineButton[][] | null, b: InlineButton[][] | null) => JSON.stringify(a) === JSON.stringify(b);

export async function startFakeTelegram() {
  const bots = new Map<string, Bot>();
  const calls: RecordedCall[] = [];
  const sockets = new Set<Socket>();
  const chatMessageIds = new Map<number, number>();
  const sent: BotMessage[] = [];
  const actions: { chatId: number; action: string; at: number }[] = [];
  const presses: Press[] = [];
  const seen = changes();
  let nextUpdate = 100_000 + Math.floor(Math.random() * 1000);
  let down = false;

  const changed = seen.changed;
  const nextMessageId = (chatId: number) => {
    const id = (chatMessageIds.get(chatId) ?? 0) + 1;
    chatMessageIds.set(chatId, id);
    return id;
  };

  async function readParams(req: IncomingMessage, url: URL): Promise<Record<string, any>> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const params: Record<string, any> = Object.fromEntries(url.searchParams);
    if (!text) return params;
    if ((req.headers['content-type'] ?? '').includes('application/json')) return { ...params, ...JSON.parse(text) };
    return { ...params, ...Object.fromEntries(new URLSearchParams(text)) };
  }

  const messageOf = (m: BotMessage, bot: Bot) => ({
    message_id: m.message_id,
    date: Math.floor(m.times[0]! / 1000),
    chat: { id: m.chatId, type: 'private' },
    from: bot.user,
    text: m.text,
    ...(m.keyboard ? { reply_markup: { inline_keyboard: m.keyboard } } : {}),
  });

  function getUpdates(bot: Bot, params: Record<string, any>, respond: Poll['respond'], gone: (drop: () => void) => void) {
    const offset = params.offset === undefined ? 0 : Number(params.offset);
    const allowed = typeof params.allowed_updates === 'string' ? JSON.parse(params.allowed_updates) : params.allowed_updates;
    if (Array.isArray(allowed)) bot.allowed = allowed.length ? allowed.map(String) : null;
    // Telegram forgets what lies below the offset asked for: those updates are confirmed.
    if (offset) bot.updates = bot.updates.filter((u) => u.update_id >= offset);
    const limit = Math.min(100, Number(params.limit ?? 100));
    const ready = () => bot.updates.filter((u) => u.update_id >= offset).slice(0, limit);
    if (bot.poll) {
      bot.conflicts++;
      bot.poll.respond(409, fail(409, 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running'));
    }
    const now = ready();
    const timeout = Number(params.timeout ?? 0);
    if (now.length || timeout <= 0) return respond(200, ok(now));
    bot.polling++;
    bot.maxPolling = Math.max(bot.maxPolling, bot.polling);
    const poll: Poll = {
      offset,
      limit,
      respond: (status, body) => {
        clearTimeout(poll.timer);
        if (bot.poll === poll) bot.poll = null;
        bot.polling--;
        respond(status, body);
      },
      timer: setTimeout(() => poll.respond(200, ok(ready())), timeout * 1000),
    };
    bot.poll = poll;
    // A poller that dies leaves no poll behind: Telegram too forgets a request whose connection closed.
    gone(() => {
      if (bot.poll !== poll) return;
      clearTimeout(poll.timer);
      bot.poll = null;
      bot.polling--;
      changed();
    });
    changed();
  }

  function call(bot: Bot, method: string, p: Record<string, any>): { status: number; body: object } | 'poll' {
    const chatId = Number(p.chat_id);
    const text = typeof p.text === 'string' ? p.text : '';
    const markup = p.reply_markup === undefined ? { keyboard: null } : keyboardOf(p.reply_markup);
    if ('error' in markup) return { status: 400, body: fail(400, `Bad Request: ${markup.error}`) };
    const target = () => sent.find((s) => s.chatId === chatId && s.message_id === Number(p.message_id));
    const notModified = fail(
      400,
      'Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message',
    );
    switch (method) {
      case 'getMe':
        return { status: 200, body: ok(bot.user) };
      case 'getUpdates':
        return 'poll';
      case 'sendChatAction':
        actions.push({ chatId, action: String(p.action), at: Date.now() });
        return { status: 200, body: ok(true) };
      case 'sendMessage': {
        if (!text.trim()) return { status: 400, body: fail(400, 'Bad Request: message text is empty') };
        if (text.length > 4096) return { status: 400, body: fail(400, 'Bad Request: message is too long') };
        const reply = typeof p.reply_parameters === 'string' ? JSON.parse(p.reply_parameters) : p.reply_parameters;
        const m: BotMessage = {
          message_id: nextMessageId(chatId),
          chatId,
          text,
          replyTo: reply?.message_id ?? (p.reply_to_message_id ? Number(p.reply_to_message_id) : null),
          times: [Date.now()],
          texts: [text],
          keyboard: markup.keyboard,
        };
        sent.push(m);
        return { status: 200, body: ok(messageOf(m, bot)) };
      }
      case 'editMessageText': {
        const m = target();
        if (!m) return { status: 400, body: fail(400, 'Bad Request: message to edit not found') };
        if (!text.trim()) return { status: 400, body: fail(400, 'Bad Request: message text is empty') };
        if (text.length > 4096) return { status: 400, body: fail(400, 'Bad Request: MESSAGE_TOO_LONG') };
        // The keyboard is the one given with the edit: none when none is.
        if (m.text === text && sameKeyboard(m.keyboard, markup.keyboard)) return { status: 400, body: notModified };
        m.keyboard = markup.keyboard;
        if (m.text !== text) {
          m.text = text;
          m.texts.push(text);
        }
        m.times.push(Date.now());
        return { status: 200, body: ok(messageOf(m, bot)) };
      }
      case 'editMessageReplyMarkup': {
        const m = target();
        if (!m) return { status: 400, body: fail(400, 'Bad Request: message to edit not found') };
        if (sameKeyboard(m.keyboard, markup.keyboard)) return { status: 400, body: notModified };
        m.keyboard = markup.keyboard;
        m.times.push(Date.now());
        return { status: 200, body: ok(messageOf(m, bot)) };
      }
      case 'answerCallbackQuery': {
        const press = presses.find((q) => q.id === String(p.callback_query_id ?? ''));
        if (!press || press.answer)
          return { status: 400, body: fail(400, 'Bad Request: query is too old and response timeout expired or query ID is invalid') };
        if (p.text !== undefined && (typeof p.text !== 'string' || p.text.length > 200))
          return { status: 400, body: fail(400, 'Bad Request: MESSAGE_TOO_LONG') };
        press.answer = { text: typeof p.text === 'string' ? p.text : null, show_alert: p.show_alert === true || p.show_alert === 'true' };
        return { status: 200, body: ok(true) };
      }
      default:
        return { status: 404, body: fail(404, 'Not Found') };
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const arrived = Date.now();
    const url = new URL(req.url ?? '/', 'http://telegram.invalid');
    const params = await readParams(req, url).catch(() => null);
    const send = (status: number, body: object) => {
      if (res.writableEnded || res.destroyed) return;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    const [, token, method] = url.pathname.match(/^\/bot([^/]+)\/([A-Za-z]+)$/) ?? [];
    const record = (answer: RecordedCall['answer']) => {
      calls.push({ token: token ?? '', method: method ?? url.pathname, params: params ?? {}, at: arrived, answer });
      changed();
    };
    if (down) {
      record(0);
      return void req.socket.destroy();
    }
    const bot = token ? bots.get(token) : undefined;
    const refuse = (status: number, description: string) => {
      record(status);
      send(status, fail(status, description));
    };
    if (!token || !method) return refuse(404, 'Not Found');
    if (!bot || bot.revoked) return refuse(401, 'Unauthorized');
    if (!params) return refuse(400, 'Bad Request: invalid parameters');
    const fault = bot.faults.findIndex((f) => f.method === method);
    if (fault >= 0) {
      const [f] = bot.faults.splice(fault, 1);
      record(f!.status);
      return send(f!.status, fail(f!.status, f!.description, f!.retryAfter));
    }
    const result = call(bot, method, params);
    if (result === 'poll') {
      return getUpdates(
        bot,
        params,
        (status, body) => {
          record(status === 200 ? 'ok' : status);
          send(status, body);
        },
        (drop) => res.on('close', () => !res.writableEnded && drop()),
      );
    }
    record(result.status === 200 ? 'ok' : result.status);
    send(result.status, result.body);
    changed();
  }

  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  /** Ends the bot's open poll with what is ready for it. */
  const deliver = (bot: Bot) => {
    const poll = bot.poll;
    if (poll) {
      const ready = bot.updates.filter((u) => u.update_id >= poll.offset).slice(0, poll.limit);
      if (ready.length) poll.respond(200, ok(ready));
    }
    changed();
  };
  const botNamed = (token: string) => {
    const bot = bots.get(token);
    if (!bot) throw new Error('no such bot');
    return bot;
  };

  /** Resolves once `check` holds (looked at on every call and message), or fails after `timeoutMs`. */
  const until = <T>(check: () => T | undefined | null | false, timeoutMs = 30_000, what = 'the fake Telegram to see it') =>
    seen.until(check, what, timeoutMs);

  return {
    apiUrl: `http://127.0.0.1:${port}`,
    /** A new bot; its token as BotFather would give it. */
    addBot(username = `bot${bots.size + 1}_bot`) {
      const id = 7_000_000_000 + bots.size + Math.floor(Math.random() * 1_000_000);
      const token = `${id}:${randomBytes(27).toString('base64url')}`;
      bots.set(token, {
        token,
        user: { id, is_bot: true, first_name: username.replace(/_bot$/, ''), username },
        revoked: false,
        updates: [],
        poll: null,
        polling: 0,
        maxPolling: 0,
        conflicts: 0,
        faults: [],
        allowed: null,
      });
      return token;
    },
    /** The bot's owner makes a new token in BotFather: the old one is refused from now on, the new one opens the same bot. */
    renewToken(token: string) {
      const bot = botNamed(token);
      const renewed = `${bot.user.id}:${randomBytes(27).toString('base64url')}`;
      bot.poll?.respond(401, fail(401, 'Unauthorized'));
      bots.set(renewed, { ...bot, token: renewed, poll: null, polling: 0 });
      bot.revoked = true;
      return renewed;
    },
    /** The bot's owner revoked the token in BotFather: every call with it is 401 from now on. */
    revoke(token: string) {
      const bot = botNamed(token);
      bot.revoked = true;
      bot.poll?.respond(401, fail(401, 'Unauthorized'));
    },
    /** The next call of `method` by this bot fails with this status (`retryAfter` in seconds for 429). */
    failNext(token: string, method: string, status: number, description: string, retryAfter?: number) {
      botNamed(token).faults.push({ method, status, description, retryAfter });
    },
    /** Connections are cut as requests arrive (and those open now) until `up`. */
    down() {
      down = true;
      for (const bot of bots.values()) if (bot.poll) bot.poll.respond(502, fail(502, 'Bad Gateway'));
      for (const s of sockets) s.destroy();
    },
    up() {
      down = false;
    },
    /** The bot's username, as getMe gives it (without the @). */
    botName: (token: string) => botNamed(token).user.username,
    /** A person writes in a chat; the message's id in that chat. */
    message(token: string, chat: TgChat, from: TgUser, text: string): number {
      const bot = botNamed(token);
      const message_id = nextMessageId(chat.id);
      bot.updates.push({
        update_id: nextUpdate++,
        message: { message_id, date: Math.floor(Date.now() / 1000), chat, from: { ...from, is_bot: false }, text },
      });
      deliver(bot);
      return message_id;
    },
    /**
     * A person presses the button labelled `label` under the bot's message `messageId`: a
     * `callback_query` update, delivered only if the bot's polls asked for those. Its id.
     * `shown`: the keyboard as the person's screen still shows it, a moment behind the bot's edit.
     */
    press(token: string, chat: TgChat, from: TgUser, messageId: number, label: string, shown?: InlineButton[][]): string {
      const bot = botNamed(token);
      const m = sent.find((s) => s.chatId === chat.id && s.message_id === messageId);
      const button = (shown ?? m?.keyboard)?.flat().find((b) => b.text === label);
      if (!m || !button?.callback_data) throw new Error(`no button "${label}" under message ${messageId}`);
      const press: Press = {
        id: String(4_000_000_000_000 + presses.length * 7919),
        chatId: chat.id,
        messageId,
        from,
        data: button.callback_data,
        answer: null,
      };
      presses.push(press);
      if (bot.allowed && !bot.allowed.includes('callback_query')) return press.id;
      bot.updates.push({
        update_id: nextUpdate++,
        callback_query: {
          id: press.id,
          from: { ...from, is_bot: false },
          message: { ...messageOf(m, bot), chat },
          chat_instance: String(chat.id * 31),
          data: button.callback_data,
        },
      });
      deliver(bot);
      return press.id;
    },
    /** A press, with how the bot answered it. */
    pressed: (id: string) => presses.find((q) => q.id === id),
    /** What the bot sent in a chat, in order. */
    sentIn: (chatId: number) => sent.filter((m) => m.chatId === chatId),
    /** The bot's answers to one message of a chat. */
    answersTo: (chatId: number, messageId: number) => sent.filter((m) => m.chatId === chatId && m.replyTo === messageId),
    actions: (chatId: number) => actions.filter((a) => a.chatId === chatId),
    calls: (token?: string, method?: string) => calls.filter((c) => (!token || c.token === token) && (!method || c.method === method)),
    /** Updates Telegram still holds for the bot (not yet confirmed by a later offset). */
    unconfirmed: (token: string) => botNamed(token).updates.length,
    /** How many getUpdates of the bot were ever open at once, and how many were cut short by another (409). */
    polling: (token: string) => ({ now: botNamed(token).polling, max: botNamed(token).maxPolling, conflicts: botNamed(token).conflicts }),
    until,
    async close() {
      for (const bot of bots.values()) bot.poll?.respond(200, ok([]));
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type FakeTelegram = Awaited<ReturnType<typeof startFakeTelegram>>;
