import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { telegramConnector } from '../../src/connectors/telegram/connector.ts';
import { pacer } from '../../src/connectors/telegram/outbox.ts';
import { sleep } from '../../src/domain/deployments/waits.ts';
import {
  type Connector,
  type Conversation,
  type InboundMessage,
  type InboundPress,
  type PlatformSecrets,
  PlatformUnreachable,
  type ReceiveHooks,
  type Receiver,
  SecretsRefused,
} from '../../src/domain/deployments/ports.ts';
import { type FakeTelegram, startFakeTelegram, type TgChat } from '../helpers/fake-telegram.ts';
import { setUp } from '../helpers/set-up.ts';
import { changes } from '../helpers/until.ts';

/**
 * The Telegram connector on its own, through the deployments' `Connector` port only (validate,
 * start, stop, deliver), against the fake Bot API over real HTTP. `portChecks` holds what any
 * platform behind the port must get right; a second platform (Discord, an HTTP webhook) runs
 * them with a `PlatformDouble` of its own. Telegram's particulars (typing, its pace per chat,
 * its 4096-character messages, `retry_after`) follow in their own describe.
 */

/** Telegram's own numbers, as its Bot API documents them (not read from the implementation). */
const TELEGRAM_MESSAGE_LIMIT = 4096;
const PRIVATE_CHAT_GAP_MS = 1_000;
/**
 * The pace runs from when a request to the chat ended, so a request that took long on its way
 * cannot bring the next one closer: gaps between arrivals hold in full, but for the millisecond a
 * timer may fire early.
 */
const TRIP_ALLOWANCE_MS = 2;
/** Every wait in this file: well inside a test's 30 s, so a miss fails with what was awaited. */
const WAIT_MS = 20_000;

/** A message as the account shows it in a conversation. */
interface Shown {
  ref: string;
  text: string;
  /** The message it answers, or null. */
  replyTo: string | null;
  /** Every text it held, first to last (sent, then edited). */
  texts: string[];
}

/** What the port checks need of a platform and of its fake. */
interface PlatformDouble {
  /** The connector under test, its reads waiting a second for news. */
  connector: Connector;
  /** The same platform's connector whose reads wait long for news (longer than a test). */
  patientConnector: Connector;
  /** The secrets field a refusal names. */
  field: string;
  /** A new account the platform accepts: its secrets, and the public name and id `validate` answers. */
  account(name: string): { secrets: PlatformSecrets; account: string; accountId: string };
  /** The account's owner makes new secrets for it (the old ones no longer work): the new ones. */
  renew(secrets: PlatformSecrets): PlatformSecrets;
  /** Secrets in the platform's form that it does not know. */
  unknownSecrets(): PlatformSecrets;
  /** Secrets not in the platform's form at all. */
  malformedSecrets: PlatformSecrets[];
  /** The account's owner revokes its secrets. */
  revoke(secrets: PlatformSecrets): void;
  /** The platform cannot be reached until `up`. */
  down(): void;
  up(): void;
  /** How many requests the platform has received. */
  requests(): number;
  /** Whether a read of this account is waiting at the platform for news now. */
  reading(secrets: PlatformSecrets): boolean;
  /** A new conversation with the account. */
  conversation(kind: Conversation['kind']): Conversation;
  /** Someone writes in a conversation: the message's ref. */
  write(secrets: PlatformSecrets, conversation: Conversation, person: string, text: string): string;
  /** What the account shows in a conversation, oldest first. */
  shown(conversation: Conversation): Shown[];
  /** Resolves once `check` holds, looked at whenever the platform sees something. */
  until<T>(check: () => T | undefined | null | false, what: string): Promise<T>;
}

let tg: FakeTelegram;
let telegram: PlatformDouble;

setUp(async (start) => {
  tg = await start.service(startFakeTelegram());
  telegram = telegramDouble(tg);
});

function telegramDouble(fake: FakeTelegram): PlatformDouble {
  const chats = new Map<string, TgChat>();
  const people = new Map<string, number>();
  let nextChat = 0;
  const tokenOf = (secrets: PlatformSecrets) => secrets.token!;
  return {
    connector: telegramConnector({ apiUrl: fake.apiUrl, pollTimeoutS: 1 }),
    patientConnector: telegramConnector({ apiUrl: fake.apiUrl, pollTimeoutS: 50 }),
    field: 'secrets.telegram.token',
    account(name) {
      const token = fake.addBot(name);
      return { secrets: { token }, account: `@${name}`, accountId: token.split(':')[0]! };
    },
    renew: (secrets) => ({ token: fake.renewToken(tokenOf(secrets)) }),
    unknownSecrets: () => ({ token: `${6_000_000_000 + Math.floor(Math.random() * 1e6)}:${randomBytes(27).toString('base64url')}` }),
    malformedSecrets: [
      {},
      { token: 'hello' },
      { token: '123456:short' },
      { token: `123456:${'a'.repeat(35)}/../getMe` },
      { token: ` 123456:${'a'.repeat(35)}` },
    ],
    revoke: (secrets) => fake.revoke(tokenOf(secrets)),
    down: () => fake.down(),
    up: () => fake.up(),
    requests: () => fake.calls().length,
    reading: (secrets) => fake.polling(tokenOf(secrets)).now > 0,
    conversation(kind) {
      nextChat++;
      const chat: TgChat =
        kind === 'group'
          ? { id: -1_000_000 - nextChat, type: 'supergroup', title: `Harbour club ${nextChat}` }
          : { id: 90_000 + nextChat, type: 'private', first_name: 'Ann', last_name: 'Lee' };
      chats.set(String(chat.id), chat);
      return { id: String(chat.id), kind, title: chat.title ?? 'Ann Lee' };
    },
    write(secrets, conversation, person, text) {
      if (!people.has(person)) people.set(person, 500 + people.size);
      const [first_name, last_name] = person.split(' ');
      const from = { id: people.get(person)!, first_name: first_name!, ...(last_name ? { last_name } : {}) };
      return String(fake.message(tokenOf(secrets), chats.get(conversation.id)!, from, text));
    },
    shown: (conversation) =>
      fake.sentIn(Number(conversation.id)).map((m) => ({
        ref: String(m.message_id),
        text: m.text,
        replyTo: m.replyTo === null ? null : String(m.replyTo),
        texts: [...m.texts],
      })),
    until: (check, what) => fake.until(check, WAIT_MS, what),
  };
}

/** What the receiver told its hooks, in order. */
type Heard =
  | { hook: 'take'; messages: InboundMessage[]; cursor: string }
  | { hook: 'press'; press: InboundPress }
  | { hook: 'revoked'; reason: string }
  | { hook: 'fault'; reason: string; retryInMs: number }
  | { hook: 'healthy' };

/** Waits on what a test notes itself (hooks called, refs told): `until` looks again at each `changed`. */
function watcher(state: () => string) {
  const seen = changes(state);
  return { changed: seen.changed, until: <T>(check: () => T | undefined | null | false, what: string) => seen.until(check, what, WAIT_MS) };
}

/** Hooks that note every call; `take` answers what `accept` says of the nth batch (from 1). */
function listening(cursor: string | null, accept: (batch: number) => boolean = () => true) {
  const heard: Heard[] = [];
  const watch = watcher(() => `heard ${JSON.stringify(heard.map((h) => h.hook))}`);
  const note = (h: Heard) => {
    heard.push(h);
    watch.changed();
  };
  const takes = () => heard.flatMap((h) => (h.hook === 'take' ? [h] : []));
  const hooks: ReceiveHooks = {
    cursor,
    async take(messages, to) {
      note({ hook: 'take', messages, cursor: to });
      return accept(takes().length);
    },
    async press(press) {
      note({ hook: 'press', press });
    },
    async revoked(reason) {
      note({ hook: 'revoked', reason });
    },
    fault(reason, retryInMs) {
      note({ hook: 'fault', reason, retryInMs });
    },
    healthy() {
      note({ hook: 'healthy' });
    },
  };
  return {
    hooks,
    heard,
    takes,
    texts: () => takes().flatMap((t) => t.messages.map((m) => m.text)),
    faults: () => heard.flatMap((h) => (h.hook === 'fault' ? [h] : [])),
    /** Resolves once `check` holds, looked at whenever a hook is called. */
    until: watch.until,
  };
}

/** Receivers started by a test, stopped after it even when it fails. */
const receivers: Receiver[] = [];
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.stop()));
});
function receive(connector: Connector, secrets: PlatformSecrets, hooks: ReceiveHooks) {
  const receiver = connector.start(secrets, hooks);
  receivers.push(receiver);
  return receiver;
}

/** The error a promise rejects with (failing when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a rejection, and it resolved');
}

/** A refusal of secrets: the field named, and nothing of the secrets in what anyone is shown. */
function expectRefused(e: Error, field: string, secrets: PlatformSecrets) {
  expect(e).toBeInstanceOf(SecretsRefused);
  expect((e as SecretsRefused).field).toBe(field);
  for (const value of Object.values(secrets))
    if (value.length > 8) expect(`${e.message} ${(e as SecretsRefused).reason}`).not.toContain(value);
}

/** An answer's `sent` that notes each list of refs it is told; `until` waits on what it was told. */
function noting() {
  const told: string[][] = [];
  const watch = watcher(() => `told ${JSON.stringify(told)}`);
  const sent = async (refs: string[]) => {
    told.push(refs);
    watch.changed();
  };
  return { told, sent, until: watch.until };
}

/** What a platform behind the `Connector` port must get right, asked of its double. */
function portChecks(name: string, double: () => PlatformDouble) {
  describe(`${name} behind the Connector port`, () => {
    afterEach(() => double().up());

    describe('validate', () => {
      it("answers the account's public name and id for secrets the platform accepts", async () => {
        const p = double();
        const { secrets, account, accountId } = p.account('harbour_helper_bot');
        expect(await p.connector.validate(secrets)).toEqual({ account, accountId });
        const other = p.account('other_helper_bot');
        expect((await p.connector.validate(other.secrets)).accountId).not.toBe(accountId);
      });

      it('names the account by the same id whichever of its secrets open it (new ones made for it)', async () => {
        const p = double();
        const { secrets, account, accountId } = p.account('renewed_bot');
        const renewed = p.renew(secrets);
        expect(await p.connector.validate(renewed)).toEqual({ account, accountId });
        expectRefused(await rejection(p.connector.validate(secrets)), p.field, secrets);
      });

      it('refuses secrets the platform does not know, or no longer knows, naming the field', async () => {
        const p = double();
        const unknown = p.unknownSecrets();
        expectRefused(await rejection(p.connector.validate(unknown)), p.field, unknown);
        const { secrets } = p.account('revoked_soon_bot');
        p.revoke(secrets);
        expectRefused(await rejection(p.connector.validate(secrets)), p.field, secrets);
      });

      it('refuses secrets not in the platform’s form without asking the platform', async () => {
        const p = double();
        const before = p.requests();
        for (const secrets of p.malformedSecrets) expectRefused(await rejection(p.connector.validate(secrets)), p.field, secrets);
        expect(p.requests()).toBe(before);
      });

      it('says the platform is unreachable, deciding nothing, while it cannot be asked', async () => {
        const p = double();
        const { secrets, account, accountId } = p.account('away_bot');
        p.down();
        const e = await rejection(p.connector.validate(secrets));
        expect(e).toBeInstanceOf(PlatformUnreachable);
        expect(e).not.toBeInstanceOf(SecretsRefused);
        for (const value of Object.values(secrets)) expect(e.message).not.toContain(value);
        p.up();
        expect(await p.connector.validate(secrets)).toEqual({ account, accountId });
      });
    });

    describe('start', () => {
      it('hands messages to take in the order they were written, each batch with the cursor past it', async () => {
        const p = double();
        const { secrets } = p.account('order_bot');
        const club = p.conversation('group');
        const early = [
          ['Ann Lee', 'one'],
          ['Ben', 'two'],
          ['Ann Lee', 'three'],
        ].map(([who, text]) => ({ who, text, ref: p.write(secrets, club, who!, text!) }));
        const heard = listening(null);
        receive(p.connector, secrets, heard.hooks);
        await heard.until(() => heard.texts().length === 3, 'the three messages written before it started');
        // Written before it started: they come as one batch.
        expect(heard.takes()).toHaveLength(1);
        const late = [
          ['Ben', 'four'],
          ['Ann Lee', 'five'],
        ].map(([who, text]) => ({ who, text, ref: p.write(secrets, club, who!, text!) }));
        await heard.until(() => heard.texts().length === 5, 'the two written while it read');

        const messages = heard.takes().flatMap((t) => t.messages);
        expect(messages.map((m) => [m.text, m.messageRef, m.sender.name, m.conversation])).toEqual(
          [...early, ...late].map((w) => [w.text, w.ref, w.who, club]),
        );
        const senders = new Map(messages.map((m) => [m.sender.name, m.sender.ref]));
        expect(senders.size).toBe(2);
        for (const m of messages) expect(m.sender.ref).toBe(senders.get(m.sender.name));
        expect(new Set(messages.map((m) => m.eventId)).size).toBe(5);
        const cursors = heard.takes().map((t) => t.cursor);
        expect(new Set(cursors).size).toBe(cursors.length);
        expect(heard.heard.every((h) => h.hook === 'take')).toBe(true);
      });

      it('stops at once, confirming nothing, when take answers false: the batch is handed over again', async () => {
        const p = double();
        const { secrets } = p.account('lease_lost_bot');
        const chat = p.conversation('private');
        p.write(secrets, chat, 'Ann Lee', 'first');
        const refused = listening(null, () => false);
        // Ends by itself: no stop is called.
        await receive(p.connector, secrets, refused.hooks).ended;
        expect(refused.texts()).toEqual(['first']);

        p.write(secrets, chat, 'Ann Lee', 'second');
        const next = listening(null);
        receive(p.connector, secrets, next.hooks);
        await next.until(() => next.texts().length >= 2, 'both messages');
        expect(next.texts()).toEqual(['first', 'second']);
      });

      it('hands a batch over again when take throws (it could not be recorded), telling no fault of the platform, then reads on', async () => {
        const p = double();
        const { secrets } = p.account('unrecorded_bot');
        const chat = p.conversation('private');
        p.write(secrets, chat, 'Ann Lee', 'first');
        const heard = listening(null, (batch) => {
          if (batch <= 2) throw new Error('the database is away');
          return true;
        });
        receive(p.connector, secrets, heard.hooks);
        await heard.until(() => heard.takes().length === 3, 'the batch handed over a third time');
        p.write(secrets, chat, 'Ann Lee', 'second');
        await heard.until(() => heard.texts().length === 4, 'the next message');
        expect(heard.texts()).toEqual(['first', 'first', 'first', 'second']);
        expect(
          new Set(
            heard
              .takes()
              .slice(0, 3)
              .map((t) => t.cursor),
          ).size,
        ).toBe(1);
        expect(heard.heard.map((h) => h.hook)).toEqual(['take', 'take', 'take', 'take']);
      });

      it('reads on from the cursor it is given, never handing over what lies below it', async () => {
        const p = double();
        const { secrets } = p.account('resume_bot');
        const chat = p.conversation('private');
        p.write(secrets, chat, 'Ann Lee', 'one');
        p.write(secrets, chat, 'Ann Lee', 'two');
        // An instance that recorded the batch, then died before confirming it to the platform.
        const died = listening(null, () => false);
        await receive(p.connector, secrets, died.hooks).ended;
        expect(died.texts()).toEqual(['one', 'two']);

        p.write(secrets, chat, 'Ann Lee', 'three');
        const resumed = listening(died.takes()[0]!.cursor);
        receive(p.connector, secrets, resumed.hooks);
        await resumed.until(() => resumed.texts().length >= 1, 'the message past the cursor');
        p.write(secrets, chat, 'Ann Lee', 'four');
        await resumed.until(() => resumed.texts().length >= 2, 'the next message');
        expect(resumed.texts()).toEqual(['three', 'four']);
      });

      it('tells revoked and ends when the secrets are revoked, while reading or before it starts', async () => {
        const p = double();
        const { secrets } = p.account('revoked_bot');
        const chat = p.conversation('private');
        const heard = listening(null);
        const receiver = receive(p.connector, secrets, heard.hooks);
        p.write(secrets, chat, 'Ann Lee', 'hello');
        await heard.until(() => heard.texts().length === 1, 'the message');
        p.revoke(secrets);
        await receiver.ended;
        expect(heard.heard.map((h) => h.hook)).toEqual(['take', 'revoked']);
        const { reason } = heard.heard[1] as { reason: string };
        expect(reason).toBeTruthy();
        for (const value of Object.values(secrets)) expect(reason).not.toContain(value);

        const again = listening(null);
        await receive(p.connector, secrets, again.hooks).ended;
        expect(again.heard.map((h) => h.hook)).toEqual(['revoked']);
      });

      it('tells of each fault with a growing pause while the platform is unreachable, then that it is healthy, and reads on', async () => {
        const p = double();
        const { secrets } = p.account('outage_bot');
        const chat = p.conversation('private');
        const heard = listening(null);
        receive(p.connector, secrets, heard.hooks);
        p.write(secrets, chat, 'Ann Lee', 'before');
        await heard.until(() => heard.texts().length === 1, 'the message before the outage');
        p.down();
        await heard.until(() => heard.faults().length >= 2, 'two faults');
        p.up();
        p.write(secrets, chat, 'Ann Lee', 'after');
        await heard.until(() => heard.texts().length === 2, 'the message after the outage');

        const hooks = heard.heard.map((h) => h.hook);
        expect(hooks.slice(0, 3)).toEqual(['take', 'fault', 'fault']);
        expect(hooks.slice(-2)).toEqual(['healthy', 'take']);
        expect(hooks.slice(1, -2).every((h) => h === 'fault')).toBe(true);
        const pauses = heard.faults().map((f) => f.retryInMs);
        // Never at once, and longer each time (no busy loop against a platform that is down).
        expect(pauses[0]).toBeGreaterThan(0);
        for (let i = 1; i < pauses.length; i++) expect(pauses[i]).toBeGreaterThan(pauses[i - 1]!);
        for (const f of heard.faults()) for (const value of Object.values(secrets)) expect(f.reason).not.toContain(value);
        expect(heard.texts()).toEqual(['before', 'after']);
      });

      it('stop ends a long wait for news at once, and ended settles', async () => {
        const p = double();
        const { secrets } = p.account('patient_bot');
        const heard = listening(null);
        const receiver = p.patientConnector.start(secrets, heard.hooks);
        receivers.push(receiver);
        await p.until(() => p.reading(secrets), 'the long read to be open');
        // The read would wait longer than this test may take; stop must not wait for it.
        await receiver.stop();
        await receiver.ended;
        await p.until(() => !p.reading(secrets), 'the long read to be closed');
        expect(heard.heard).toEqual([]);
      });
    });

    describe('deliver', () => {
      it("finishes an answer as one message replying to the person's, telling sent its ref first", async () => {
        const p = double();
        const { secrets } = p.account('answer_bot');
        const chat = p.conversation('private');
        const asked = p.write(secrets, chat, 'Ann Lee', 'When does the harbour open?');
        const { told, sent } = noting();
        const refs = await p.connector.deliver(secrets, chat).answer({ messageRef: asked, refs: [], sent }).finish('At nine.');
        expect(refs).toHaveLength(1);
        expect(told).toEqual([refs]);
        expect(p.shown(chat)).toEqual([{ ref: refs[0], text: 'At nine.', replyTo: asked, texts: ['At nine.'] }]);
      });

      it('shows the answer as it grows in that one message, ending with the whole text', async () => {
        const p = double();
        const { secrets } = p.account('growing_bot');
        const chat = p.conversation('private');
        const asked = p.write(secrets, chat, 'Ann Lee', 'Tell me about the harbour.');
        const { told, sent } = noting();
        const out = p.connector.deliver(secrets, chat).answer({ messageRef: asked, refs: [], sent });
        out.show('The');
        await p.until(() => p.shown(chat).length === 1, 'the first words');
        out.show('The harbour');
        out.show('The harbour opens');
        const whole = 'The harbour opens at nine.';
        const refs = await out.finish(whole);

        const [message, ...more] = p.shown(chat);
        expect(more).toEqual([]);
        expect(message).toMatchObject({ ref: refs[0], text: whole, replyTo: asked });
        expect(message!.texts[0]).toBe('The');
        expect(message!.texts.at(-1)).toBe(whole);
        for (const text of message!.texts) expect(whole.startsWith(text)).toBe(true);
        expect(told).toEqual([refs]);
      });

      it('carries on in the messages an earlier attempt sent: edited, never sent again', async () => {
        const p = double();
        const { secrets } = p.account('again_bot');
        const chat = p.conversation('private');
        const asked = p.write(secrets, chat, 'Ann Lee', 'Is it open?');
        const first = noting();
        p.connector.deliver(secrets, chat).answer({ messageRef: asked, refs: [], sent: first.sent }).show('It is');
        await first.until(() => first.told.length === 1, 'the first attempt to send');
        // That attempt is given up (its instance died); the next starts from its refs.
        const second = noting();
        const whole = 'It is open until six.';
        const refs = await p.connector
          .deliver(secrets, chat)
          .answer({ messageRef: asked, refs: first.told[0]!, sent: second.sent })
          .finish(whole);
        expect(refs).toEqual(first.told[0]);
        expect(second.told).toEqual([]);
        expect(p.shown(chat)).toEqual([{ ref: refs[0], text: whole, replyTo: asked, texts: ['It is', whole] }]);

        // An attempt whose message already holds the whole answer changes nothing.
        const third = noting();
        expect(await p.connector.deliver(secrets, chat).answer({ messageRef: asked, refs, sent: third.sent }).finish(whole)).toEqual(refs);
        expect(third.told).toEqual([]);
        expect(p.shown(chat)).toHaveLength(1);
      });

      it('refuses to finish, or to send a notice, once the secrets are revoked', async () => {
        const p = double();
        const { secrets } = p.account('gone_bot');
        const chat = p.conversation('private');
        const asked = p.write(secrets, chat, 'Ann Lee', 'Hello?');
        p.revoke(secrets);
        const outbox = p.connector.deliver(secrets, chat);
        const out = outbox.answer({ messageRef: asked, refs: [], sent: noting().sent });
        out.show('Hel');
        expectRefused(await rejection(out.finish('Hello.')), p.field, secrets);
        expectRefused(await rejection(outbox.notice('Slow down.', asked)), p.field, secrets);
        expect(p.shown(chat)).toEqual([]);
      });

      it('sends a notice as a reply to the message it is about', async () => {
        const p = double();
        const { secrets } = p.account('notice_bot');
        const club = p.conversation('group');
        const asked = p.write(secrets, club, 'Ben', 'Again! Again!');
        await p.connector.deliver(secrets, club).notice('Too many messages here; try again in a minute.', asked);
        expect(p.shown(club)).toMatchObject([{ text: 'Too many messages here; try again in a minute.', replyTo: asked }]);
      });
    });
  });
}

portChecks('Telegram', () => telegram);

/** Gaps between the moments a chat's messages were sent or edited, as the fake saw them, in order. */
function gapsIn(chatId: number) {
  const times = tg
    .sentIn(chatId)
    .flatMap((m) => m.times)
    .sort((a, b) => a - b);
  return times.slice(1).map((t, i) => t - times[i]!);
}

describe('Telegram particulars', () => {
  const chatOf = (conversation: Conversation) => Number(conversation.id);

  it('shows typing until the first text is shown, and not for an answer that already has its message', async () => {
    const { secrets } = telegram.account('typing_bot');
    const chat = telegram.conversation('private');
    const asked = telegram.write(secrets, chat, 'Ann Lee', 'Think hard.');
    const first = noting();
    const out = telegram.connector.deliver(secrets, chat).answer({ messageRef: asked, refs: [], sent: first.sent });
    out.typing();
    await tg.until(() => tg.actions(chatOf(chat)).length === 1, WAIT_MS, 'typing');
    expect(tg.actions(chatOf(chat)).map((a) => a.action)).toEqual(['typing']);
    out.show('Hmm');
    await first.until(() => first.told.length === 1, 'the first text');
    out.typing();
    const refs = await out.finish('Hmm, forty-two.');

    const resumed = telegram.connector.deliver(secrets, chat).answer({ messageRef: asked, refs, sent: noting().sent });
    resumed.typing();
    await resumed.finish('Hmm, forty-two, surely.');
    expect(tg.calls(secrets.token, 'sendChatAction')).toHaveLength(1);
  });

  it('stops showing typing once an answer is given up before any text', async () => {
    const { secrets } = telegram.account('given_up_bot');
    const chat = telegram.conversation('private');
    const asked = telegram.write(secrets, chat, 'Ann Lee', 'Are you there?');
    const out = telegram.connector.deliver(secrets, chat).answer({ messageRef: asked, refs: [], sent: noting().sent });
    out.typing();
    await tg.until(() => tg.actions(chatOf(chat)).length === 1, WAIT_MS, 'typing');
    out.close();
    // Telegram's typing fades after 5 s and the outbox renews it every 4.5 s: an absence is only
    // seen by waiting past one renewal.
    await new Promise((resolve) => setTimeout(resolve, 5_500));
    expect(tg.calls(secrets.token, 'sendChatAction')).toHaveLength(1);
  });

  it("grows an answer by edits no faster than Telegram's pace for a private chat, shared by all that chat is sent", async () => {
    const { secrets } = telegram.account('paced_bot');
    const chat = telegram.conversation('private');
    const asked = telegram.write(secrets, chat, 'Ann Lee', 'Count.');
    const out = telegram.connector.deliver(secrets, chat).answer({ messageRef: asked, refs: [], sent: noting().sent });
    out.show('One');
    await tg.until(() => tg.sentIn(chatOf(chat)).length === 1, WAIT_MS, 'the first text');
    const words = ['One'];
    for (let i = 2; i <= 20; i++) {
      words.push(String(i));
      out.show(words.join(' '));
    }
    const last = words.join(' ');
    await tg.until(() => tg.sentIn(chatOf(chat))[0]!.text === last, WAIT_MS, 'the latest text');
    await out.finish(`${last}. Done.`);
    // Twenty texts shown in a burst: the ones overtaken while waiting for the pace are never sent.
    expect(tg.sentIn(chatOf(chat))[0]!.texts).toEqual(['One', last, `${last}. Done.`]);

    // A notice from another outbox of the same chat waits its turn too.
    await telegram.connector.deliver(secrets, chat).notice('That is all.', asked);
    const gaps = gapsIn(chatOf(chat));
    expect(gaps).toHaveLength(3);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(PRIVATE_CHAT_GAP_MS - TRIP_ALLOWANCE_MS);
  });

  it('paces a chat from when its last request ended: one slow on its way does not bring the next closer', async () => {
    const pace = pacer(PRIVATE_CHAT_GAP_MS);
    const slow = await pace.send(async () => {
      await sleep(1_500);
      return Date.now();
    });
    const next = await pace.send(async () => Date.now());
    expect(next - slow).toBeGreaterThanOrEqual(PRIVATE_CHAT_GAP_MS - TRIP_ALLOWANCE_MS);
  });

  it(`splits an answer past ${TELEGRAM_MESSAGE_LIMIT} characters into several messages, between words`, async () => {
    const { secrets } = telegram.account('long_bot');
    const chat = telegram.conversation('private');
    const asked = telegram.write(secrets, chat, 'Ann Lee', 'Tell me everything.');
    const whole = Array.from({ length: 1_300 }, (_, i) => `word${i}`).join(' ');
    expect(whole.length).toBeGreaterThan(2 * TELEGRAM_MESSAGE_LIMIT);
    const { told, sent } = noting();
    const refs = await telegram.connector.deliver(secrets, chat).answer({ messageRef: asked, refs: [], sent }).finish(whole);

    const shown = telegram.shown(chat);
    expect(shown.map((m) => m.ref)).toEqual(refs);
    expect(refs).toHaveLength(3);
    expect(shown.map((m) => m.text).join('')).toBe(whole);
    for (const m of shown) {
      expect(m.text.length).toBeLessThanOrEqual(TELEGRAM_MESSAGE_LIMIT);
      expect(
        m.text
          .trim()
          .split(' ')
          .every((w) => /^word\d+$/.test(w)),
      ).toBe(true);
    }
    expect(shown.map((m) => m.replyTo)).toEqual([asked, null, null]);
    // Each message is recorded as soon as it is sent: an attempt after a crash edits, never resends.
    expect(told).toEqual([refs.slice(0, 1), refs.slice(0, 2), refs]);
  });

  it('carries on in a new message when the person deleted the one an earlier attempt sent', async () => {
    const { secrets } = telegram.account('deleted_bot');
    const chat = telegram.conversation('private');
    const asked = telegram.write(secrets, chat, 'Ann Lee', 'Still there?');
    const { told, sent } = noting();
    const refs = await telegram.connector
      .deliver(secrets, chat)
      .answer({ messageRef: asked, refs: ['987654'], sent })
      .finish('Still here.');
    expect(refs).not.toEqual(['987654']);
    expect(told).toEqual([refs]);
    expect(telegram.shown(chat)).toEqual([{ ref: refs[0], text: 'Still here.', replyTo: asked, texts: ['Still here.'] }]);
  });

  it('finishes an answer after a 429, waiting retry_after, sending it once', async () => {
    const { secrets } = telegram.account('busy_send_bot');
    const chat = telegram.conversation('private');
    const asked = telegram.write(secrets, chat, 'Ann Lee', 'Now?');
    tg.failNext(secrets.token!, 'sendMessage', 429, 'Too Many Requests: retry after 1', 1);
    const refs = await telegram.connector
      .deliver(secrets, chat)
      .answer({ messageRef: asked, refs: [], sent: noting().sent })
      .finish('Now.');
    const sends = tg.calls(secrets.token, 'sendMessage');
    expect(sends.map((c) => c.answer)).toEqual([429, 'ok']);
    expect(sends[1]!.at - sends[0]!.at).toBeGreaterThanOrEqual(1_000);
    expect(telegram.shown(chat)).toMatchObject([{ ref: refs[0], text: 'Now.' }]);
  });

  it('after a 429 on getUpdates waits retry_after, tells of it, then that it is healthy again', async () => {
    const { secrets } = telegram.account('busy_poll_bot');
    const chat = telegram.conversation('private');
    tg.failNext(secrets.token!, 'getUpdates', 429, 'Too Many Requests: retry after 1', 1);
    const heard = listening(null);
    receive(telegram.connector, secrets, heard.hooks);
    await heard.until(() => heard.faults().length === 1, 'the fault');
    expect(heard.faults()[0]!.retryInMs).toBe(1_000);
    telegram.write(secrets, chat, 'Ann Lee', 'after the wait');
    await heard.until(() => heard.texts().length === 1 && heard.heard.some((h) => h.hook === 'healthy'), 'the message, healthy');
    expect(heard.heard.map((h) => h.hook)).toEqual(['fault', 'healthy', 'take']);
    const polls = tg.calls(secrets.token, 'getUpdates');
    expect(polls[0]!.answer).toBe(429);
    expect(polls[1]!.at - polls[0]!.at).toBeGreaterThanOrEqual(1_000);
  });

  it('stop ends the pause Telegram asked for at once', async () => {
    const { secrets } = telegram.account('long_pause_bot');
    tg.failNext(secrets.token!, 'getUpdates', 429, 'Too Many Requests: retry after 50', 50);
    const heard = listening(null);
    const receiver = receive(telegram.connector, secrets, heard.hooks);
    await heard.until(() => heard.faults().length === 1, 'the fault');
    expect(heard.faults()[0]!.retryInMs).toBe(50_000);
    // The pause is longer than this test may take.
    await receiver.stop();
    await receiver.ended;
    expect(tg.calls(secrets.token, 'getUpdates').map((c) => c.answer)).toEqual([429]);
  });
});
