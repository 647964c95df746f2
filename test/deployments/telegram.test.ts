import { describe, expect, it } from 'vitest';
import { credit } from '../../src/domain/manna/stores/ledger.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI, RecordedRequest, Script } from '../helpers/fake-openai.ts';
import { type FakeTelegram, startFakeTelegram, type TgChat, type TgUser } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse } from '../helpers/sse.ts';

/**
 * An agent deployed to (the fake) Telegram through the real service: people write in chats, the
 * deployment long-polls them, each chat becomes a session of its owner's, and the agent's reply
 * is sent and grown by edits. The bounds strangers meet (allowlist, a chat's pace, a daily cap)
 * and the faults Telegram can answer with (a revoked token, 429, the network gone) are made here
 * over real HTTP; at the end, nothing anyone received holds a token.
 */
let t: TestApp;
let tg: FakeTelegram;
let llm: FakeOpenAI;
let f: ReturnType<typeof fixtures>;
let alice: TestUser;
const tokens: string[] = [];
/** Every body this file received from parley: responses, stream frames, metrics. */
const received: string[] = [];
/** Scripts for the model by the last thing a person said. */
const scripts = new Map<string, Script>();

const lastUserText = (r: RecordedRequest) => {
  const text = String(r.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '');
  return [...scripts.keys()].find((k) => text.includes(k));
};

setUp(async (start) => {
  tg = await start.service(startFakeTelegram());
  llm = await start.fakeOpenAI({ tokens: ['OK', '.'] });
  llm.choose((r) => {
    const said = lastUserText(r);
    if (!said) return undefined;
    const script = scripts.get(said)!;
    // After a tool round the model writes its answer.
    return r.body.messages.some((m) => m.role === 'tool') ? { tokens: ['Here', ' it', ' is', '.'] } : script;
  });
  t = await start.app({
    llm: { baseUrl: llm.baseUrl },
    deployments: { leaseMs: 1_500, telegram: { apiUrl: tg.apiUrl, pollTimeoutS: 1 } },
  });
  f = fixtures(t);
  alice = await t.createUser('alice');
  await t.db.$transaction((tx) => credit(tx, { userId: alice.id, kind: 'forever', amount: '50', reason: 'purchase' }));
});

async function rest(method: string, path: string, body?: unknown) {
  const res = await t.rest(method, path, { key: alice.apiKey, body });
  received.push(JSON.stringify(res.body));
  return res;
}

/** An agent of alice's deployed to a new bot, polled. */
async function deployed(config: Record<string, unknown> = {}, agentFields: Record<string, unknown> = {}) {
  const agent = await f.agent(alice, { public: false, ...agentFields });
  const token = tg.addBot();
  tokens.push(token);
  const res = await rest('POST', `/v2/agents/${agent.id}/deployments`, { platform: 'telegram', secrets: { telegram: { token } }, config });
  expect(res.status).toBe(200);
  await tg.until(() => tg.polling(token).now === 1, 20_000, 'the deployment to poll');
  return { agent, token, deploymentId: res.body.deploymentId as string };
}

/** The bot's one answer to a message, once its text is `text`. */
const answered = (chat: TgChat, messageId: number, text: string) =>
  tg.until(
    () => {
      const answers = tg.answersTo(chat.id, messageId);
      return answers.length === 1 && answers[0]!.text === text && answers[0]!;
    },
    30_000,
    `the answer "${text}"`,
  );

/** The recorded updates of a deployment, by their status, once none waits to be answered. */
async function settled(deploymentId: string, count: number) {
  let rows: { status: string }[] = [];
  await expect
    .poll(
      async () => {
        rows = await t.db.deploymentUpdate.findMany({ where: { deploymentId }, orderBy: { seq: 'asc' }, select: { status: true } });
        return rows.length === count && rows.every((r) => r.status !== 'received');
      },
      { timeout: 30_000 },
    )
    .toBe(true);
  return rows.map((r) => r.status);
}

async function sessionTitled(title: string) {
  const list = await rest('GET', '/v2/sessions?limit=100');
  return (list.body.sessions ?? list.body.docs ?? []).find((s: any) => s.title === title) as { _id?: string; id?: string } | undefined;
}

const ann: TgUser = { id: 501, first_name: 'Ann', last_name: 'Lee', username: 'annlee' };
const ben: TgUser = { id: 502, first_name: 'Ben' };

describe('an agent on Telegram', () => {
  it('answers two people in one group chat, each message once, its answer growing by edits at the pace Telegram allows', async () => {
    const { token } = await deployed();
    const chat: TgChat = { id: -1001234, type: 'supergroup', title: 'Harbour club' };
    scripts.set('Hello from Ann', { tokens: 'Hello Ann , welcome to the harbour club .'.split(' ').map((w) => ` ${w}`), delayMs: 300 });
    scripts.set('And me?', { tokens: [' And', ' you', ' too', ', Ben', '.'], delayMs: 100 });

    const fromAnn = tg.message(token, chat, ann, 'Hello from Ann');
    const first = await answered(chat, fromAnn, 'Hello Ann , welcome to the harbour club .');
    // Sent at the first tokens, then edited, never faster than Telegram's twenty a minute in a group
    // (3 s apart, but for the millisecond a timer may fire early).
    expect(first.texts.length).toBeGreaterThan(1);
    for (const text of first.texts) expect(first.text.startsWith(text)).toBe(true);
    for (let i = 1; i < first.times.length; i++) expect(first.times[i]! - first.times[i - 1]!).toBeGreaterThanOrEqual(2_998);
    expect(tg.actions(chat.id).map((a) => a.action)).toContain('typing');

    const fromBen = tg.message(token, chat, ben, 'And me?');
    await answered(chat, fromBen, 'And you too, Ben.');
    expect(tg.sentIn(chat.id)).toHaveLength(2);

    // The chat is a session of the owner's; each person a sender with their Telegram name.
    const session = await sessionTitled('Harbour club (telegram)');
    expect(session).toBeDefined();
    const read = await rest('GET', `/v2/sessions/${session!._id ?? session!.id}?limit=20`);
    expect(read.status).toBe(200);
    const said = read.body.messages
      .filter((m: any) => m.role !== 'eden')
      .map((m: any) => [m.role, m.sender?.username ?? null, m.content.trim()]);
    expect(said).toEqual([
      ['user', 'Ann Lee (telegram 501)', 'Hello from Ann'],
      ['assistant', expect.any(String), 'Hello Ann , welcome to the harbour club .'],
      ['user', 'Ben (telegram 502)', 'And me?'],
      ['assistant', expect.any(String), 'And you too, Ben.'],
    ]);
    // The model heard Ann when it answered Ben: one conversation.
    const benRequest = llm.replyRequests().find((r) => lastUserText(r) === 'And me?')!;
    expect(JSON.stringify(benRequest.body.messages)).toContain('Hello from Ann');
  });

  it('lets its owner watch a chat live: the person’s message, the tokens and the end arrive on the session’s event stream', async () => {
    const { token } = await deployed();
    const chat: TgChat = { id: 3301, type: 'private', first_name: 'Ann', last_name: 'Lee' };
    scripts.set('Are you there?', { tokens: [' Yes', ',', ' here', '.'], delayMs: 100 });
    scripts.set('Still there?', { tokens: [' Still', ' here', '.'], delayMs: 100 });
    await answered(chat, tg.message(token, chat, ann, 'Are you there?'), 'Yes, here.');
    const session = (await sessionTitled('Ann Lee (telegram)'))!;
    const sse = await openSse(`${t.url}/v2/sessions/${session._id ?? session.id}/events`, { headers: { 'x-api-key': alice.apiKey } });
    try {
      const asked = tg.message(token, chat, ann, 'Still there?');
      await sse.waitFor((frame) => frame.data?.data?.type === 'end_prompt');
      const events = sse.frames.map((frame) => frame.data?.data).filter(Boolean);
      received.push(...sse.frames.map((frame) => JSON.stringify(frame.data)));
      const start = events.find((e: any) => e.type === 'start_prompt');
      expect(start.message).toMatchObject({ content: 'Still there?', sender: { username: 'Ann Lee (telegram 501)' } });
      expect(
        events
          .filter((e: any) => e.type === 'assistant_token')
          .map((e: any) => e.text)
          .join(''),
      ).toBe(' Still here.');
      await answered(chat, asked, 'Still here.');
    } finally {
      sse.close();
    }
  });

  it('shows a person who renamed themselves on Telegram under their new name, as the one sender they are', async () => {
    const { token } = await deployed();
    const cleo: TgUser = { id: 503, first_name: 'Cleo' };
    const chat: TgChat = { id: 3401, type: 'private', first_name: 'Cleo' };
    scripts.set('I am Cleo', { tokens: [' Hi', ' Cleo', '.'], delayMs: 50 });
    scripts.set('Call me Cleopatra', { tokens: [' Hello', ' Cleopatra', '.'], delayMs: 50 });
    await answered(chat, tg.message(token, chat, cleo, 'I am Cleo'), 'Hi Cleo.');
    await answered(chat, tg.message(token, chat, { ...cleo, first_name: 'Cleopatra' }, 'Call me Cleopatra'), 'Hello Cleopatra.');

    const session = (await sessionTitled('Cleo (telegram)'))!;
    const read = await rest('GET', `/v2/sessions/${session._id ?? session.id}?limit=20`);
    const said = read.body.messages
      .filter((m: any) => m.role === 'user')
      .map((m: any) => [m.sender?.username, m.sender_id, m.content.trim()]);
    expect(said).toEqual([
      ['Cleopatra (telegram 503)', expect.any(String), 'I am Cleo'],
      ['Cleopatra (telegram 503)', said[0]![1], 'Call me Cleopatra'],
    ]);
    const creator = await rest('GET', `/v2/creators/${said[0]![1]}`);
    expect(creator.status).toBe(200);
    expect(JSON.stringify(creator.body)).toContain('Cleopatra (telegram 503)');
  });

  it('answers only the chats its allowlist names; another chat is told once, and no session is made for it', async () => {
    const { token, deploymentId } = await deployed({ telegram: { topic_allowlist: [{ id: '777', note: 'Ann only' }] } });
    const allowed: TgChat = { id: 777, type: 'private', first_name: 'Ann' };
    const stranger: TgChat = { id: 888, type: 'private', first_name: 'Mallory' };
    const mallory: TgUser = { id: 888, first_name: 'Mallory' };
    scripts.set('Hi, it is Ann', { tokens: [' Hi', ' Ann', '.'] });
    scripts.set('Let me in', { tokens: [' never', ' said'] });
    const first = tg.message(token, stranger, mallory, 'Let me in');
    tg.message(token, stranger, mallory, 'Let me in');
    await answered(allowed, tg.message(token, allowed, ann, 'Hi, it is Ann'), 'Hi Ann.');
    expect(await settled(deploymentId, 3)).toEqual(['refused', 'refused', 'answered']);
    expect(tg.sentIn(stranger.id).map((m) => [m.replyTo, m.text])).toEqual([[first, 'This bot does not answer in this chat.']]);
    expect(await sessionTitled('Mallory (telegram)')).toBeUndefined();
  });

  it('answers a chat at most its rate a minute: the first over it is told why, the next is not', async () => {
    const { token, deploymentId } = await deployed({ chat_messages_per_minute: 2 });
    const chat: TgChat = { id: 901, type: 'private', first_name: 'Ben' };
    scripts.set('quick question', { tokens: [' Quick', ' answer', '.'] });
    const sent = [1, 2, 3, 4].map((n) => tg.message(token, chat, ben, `quick question ${n}`));
    expect(await settled(deploymentId, 4)).toEqual(['answered', 'answered', 'refused', 'refused']);
    expect(tg.answersTo(chat.id, sent[0]!).map((m) => m.text)).toEqual(['Quick answer.']);
    expect(tg.answersTo(chat.id, sent[1]!).map((m) => m.text)).toEqual(['Quick answer.']);
    expect(tg.answersTo(chat.id, sent[2]!).map((m) => m.text)).toEqual([
      'Too many messages: I answer at most 2 a minute in this chat. Please wait a moment.',
    ]);
    expect(tg.answersTo(chat.id, sent[3]!)).toEqual([]);
  });

  it('uses tools paid by the owner, and stops for the day at its daily manna cap, telling the chat once', async () => {
    const { token, deploymentId } = await deployed({ daily_manna_cap: 1 }, { tools: { flux_dev: true } });
    const chat: TgChat = { id: 902, type: 'private', first_name: 'Ann' };
    scripts.set('Paint a lighthouse', { toolCalls: [{ id: 'call_1', name: 'flux_dev', arguments: '{"prompt":"a lighthouse"}' }] });
    scripts.set('Another one', { tokens: [' no'] });
    const before = Number((await t.db.user.findUniqueOrThrow({ where: { id: alice.id } })).foreverBalance);
    const painted = tg.message(token, chat, ann, 'Paint a lighthouse');
    const answer = await tg.until(() => tg.answersTo(chat.id, painted).find((m) => m.text.includes('/media/')), 30_000, 'the painting');
    expect(answer.text).toMatch(/^Here it is\.\n\nhttp:\/\/127\.0\.0\.1:\d+\/media\/[\w-]+\.png$/);
    // Paid by the deployment's owner, with a ledger row.
    const after = Number((await t.db.user.findUniqueOrThrow({ where: { id: alice.id } })).foreverBalance);
    expect(before - after).toBe(1);

    const over = tg.message(token, chat, ann, 'Another one');
    const again = tg.message(token, chat, ann, 'Another one');
    expect(await settled(deploymentId, 3)).toEqual(['answered', 'refused', 'refused']);
    expect(tg.answersTo(chat.id, over).map((m) => m.text)).toEqual([
      "I have reached today's limit here and will answer again after midnight (UTC).",
    ]);
    expect(tg.answersTo(chat.id, again)).toEqual([]);
  });
});

describe('a message while the agent still answers the one before', () => {
  it('with config.while_replying interrupt: the answer under way stops and says so, the new message is answered', async () => {
    expect(
      (
        await rest('POST', `/v2/agents/${(await f.agent(alice)).id}/deployments`, {
          platform: 'telegram',
          config: { while_replying: 'reject' },
        })
      ).status,
    ).toBe(400);
    const { token } = await deployed({ while_replying: 'interrupt' });
    const chat: TgChat = { id: 3401, type: 'private', first_name: 'Ann' };
    scripts.set('Tell me a long story', { tokens: [' Once', ' upon', ' a time'], stallAfter: 2 });
    scripts.set('Just say hi', { tokens: [' Hi', '.'] });
    const story = tg.message(token, chat, ann, 'Tell me a long story');
    await tg.until(() => tg.answersTo(chat.id, story).length === 1, 30_000, 'the story to start');
    const hi = tg.message(token, chat, ann, 'Just say hi');
    await answered(chat, story, 'Once upon\n\n(the answer was stopped)');
    await answered(chat, hi, 'Hi.');
    const session = (await sessionTitled('Ann (telegram)'))!;
    const read = await rest('GET', `/v2/sessions/${session._id ?? session.id}?limit=20`);
    expect(read.body.messages.filter((m: any) => m.role === 'assistant').map((m: any) => m.status)).toEqual(['interrupted', 'complete']);
  });
});

describe('when Telegram answers with faults', () => {
  it('a revoked token makes the deployment invalid, stops its polling and says why', async () => {
    const { agent, token } = await deployed();
    tg.revoke(token);
    await expect
      .poll(async () => (await rest('GET', `/v2/agents/${agent.id}/deployments`)).body.deployments[0], { timeout: 20_000 })
      .toMatchObject({ valid: false, state: 'invalid', last_error: 'Telegram refused the bot token (it was revoked or changed)' });
    const refusedAt = tg.calls(token, 'getUpdates').findLast((c) => c.answer === 401)!.at;
    // Two lease rounds later, nothing has asked Telegram again with that token.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(tg.calls(token).filter((c) => c.at > refusedAt)).toEqual([]);
  });

  it('429 with retry_after: waits as told, then goes on, and the answer still arrives', async () => {
    const { token } = await deployed();
    const chat: TgChat = { id: 903, type: 'private', first_name: 'Ben' };
    scripts.set('after the wait', { tokens: [' Waited', '.'] });
    tg.failNext(token, 'getUpdates', 429, 'Too Many Requests: retry after 2', 2);
    const limited = await tg.until(() => tg.calls(token, 'getUpdates').find((c) => c.answer === 429), 10_000, 'the 429');
    const asked = tg.message(token, chat, ben, 'after the wait');
    tg.failNext(token, 'sendMessage', 429, 'Too Many Requests: retry after 1', 1);
    await answered(chat, asked, 'Waited.');
    const polls = tg.calls(token, 'getUpdates');
    const next = polls[polls.indexOf(limited) + 1]!;
    expect(next.at - limited.at).toBeGreaterThanOrEqual(2_000);
    const sends = tg.calls(token, 'sendMessage');
    expect(sends.map((c) => c.answer)).toEqual([429, 'ok']);
    expect(sends[1]!.at - sends[0]!.at).toBeGreaterThanOrEqual(1_000);
  });

  it('the network gone: retries with growing pauses (no busy loop), says so, and answers what was written once it is back', async () => {
    const { agent, token } = await deployed();
    const chat: TgChat = { id: 904, type: 'private', first_name: 'Ann' };
    scripts.set('are you back?', { tokens: [' Back', '.'] });
    tg.down();
    const cutAt = Date.now();
    await expect
      .poll(async () => (await rest('GET', `/v2/agents/${agent.id}/deployments`)).body.deployments[0].last_error, { timeout: 20_000 })
      .toMatch(/^Telegram could not be reached \(getUpdates/);
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    const tries = tg.calls(token, 'getUpdates').filter((c) => c.at >= cutAt);
    // 1 s, 2 s, 4 s apart (a fifth either way): four tries at most in six seconds, and at least two.
    expect(tries.length).toBeGreaterThanOrEqual(2);
    expect(tries.length).toBeLessThanOrEqual(5);
    tg.up();
    await answered(chat, tg.message(token, chat, ann, 'are you back?'), 'Back.');
    await expect
      .poll(async () => (await rest('GET', `/v2/agents/${agent.id}/deployments`)).body.deployments[0].last_error, { timeout: 20_000 })
      .toBeNull();
  });
});

describe('secrets', () => {
  it('no response, event, metric or table row holds a token in clear', async () => {
    expect(tokens.length).toBeGreaterThanOrEqual(8);
    const metrics = await fetch(`${t.url}/metrics`);
    received.push(await metrics.text());
    const tables = await t.db.$queryRaw<{ name: string }[]>`SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public'`;
    expect(tables.map((x) => x.name)).toContain('Deployment');
    for (const { name } of tables) {
      const rows = await t.db.$queryRawUnsafe<{ row: string }[]>(`SELECT row_to_json(x)::text AS row FROM "${name}" AS x`);
      received.push(...rows.map((r) => r.row));
    }
    const everything = received.join('\n');
    for (const token of tokens) {
      expect(everything).not.toContain(token);
      expect(everything).not.toContain(token.split(':')[1]);
    }
  });
});
