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
 * `sendMessage` (with `reply_parameters`), `editMessageText` ("message is not modified" when
 * nothing changes), `sendChatAction`. Tests write as people (`message`), revoke tokens, inject
 * errors (`failNext`), take the network down, and read what the bot did.
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
  message: { message_id: number; date: number; chat: TgChat; from: TgUser & { is_bot: false }; text: string };
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
}

const ok = (result: unknown) => ({ ok: true, result });
const fail = (error_code: number, description: string, retryAfter?: number) => ({
  ok: false,
  error_code,
  description,
  ...(retryAfter !== undefined ? { parameters: { retry_after: retryAfter } } : {}),
});

export async function startFakeTelegram() {
  const bots = new Map<string, Bot>();
  const calls: RecordedCall[] = [];
  const sockets = new Set<Socket>();
  const chatMessageIds = new Map<number, number>();
  const sent: BotMessage[] = [];
  const actions: { chatId: number; action: string; at: number }[] = [];
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
  });

  function getUpdates(bot: Bot, params: Record<string, any>, respond: Poll['respond'], gone: (drop: () => void) => void) {
    const offset = params.offset === undefined ? 0 : Number(params.offset);
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
        };
        sent.push(m);
        return { status: 200, body: ok(messageOf(m, bot)) };
      }
      case 'editMessageText': {
        const m = sent.find((s) => s.chatId === chatId && s.message_id === Number(p.message_id));
        if (!m) return { status: 400, body: fail(400, 'Bad Request: message to edit not found') };
        if (!text.trim()) return { status: 400, body: fail(400, 'Bad Request: message text is empty') };
        if (text.length > 4096) return { status: 400, body: fail(400, 'Bad Request: MESSAGE_TOO_LONG') };
        if (m.text === text)
          return {
            status: 400,
            body: fail(
              400,
              'Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message',
            ),
          };
        m.text = text;
        m.texts.push(text);
        m.times.push(Date.now());
        return { status: 200, body: ok(messageOf(m, bot)) };
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
      const poll = bot.poll;
      if (poll) {
        const ready = bot.updates.filter((u) => u.update_id >= poll.offset).slice(0, poll.limit);
        if (ready.length) poll.respond(200, ok(ready));
      }
      changed();
      return message_id;
    },
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
