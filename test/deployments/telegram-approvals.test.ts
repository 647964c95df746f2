import { describe, expect, it } from 'vitest';
import { credit } from '../../src/domain/manna/stores/ledger.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI, RecordedRequest } from '../helpers/fake-openai.ts';
import { type BotMessage, type FakeTelegram, startFakeTelegram, type TgChat, type TgUser } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * A tool call that waits for approval in a deployment's Telegram chat (`docs/deployments.md`,
 * "Tool calls that wait for approval"): the chat is told the tool, its arguments, its price and
 * when it counts as denied, with Approve / Deny buttons that only the owner's approver may press;
 * the reply goes on once it is answered, however it was, and the buttons go.
 */
let t: TestApp;
let tg: FakeTelegram;
let llm: FakeOpenAI;
let alice: TestUser;

const ann: TgUser = { id: 501, first_name: 'Ann', last_name: 'Lee' };
const ben: TgUser = { id: 502, first_name: 'Ben' };
let nextChat = 7100;
const privateChat = (): TgChat => ({ id: nextChat++, type: 'private', first_name: 'Ann' });

const toolAnswer = (r: RecordedRequest) => r.body.messages.find((m) => m.role === 'tool')?.content as string | undefined;

setUp(async (start) => {
  tg = await start.service(startFakeTelegram());
  llm = await start.fakeOpenAI({ tokens: ['OK'] });
  // Asked to paint, the model calls flux_dev; told what the tool said, it answers.
  llm.choose((r) => {
    if (r.body.messages.at(-1)?.role === 'tool') return { tokens: ['Here', ' it', ' is', '.'] };
    const said = String(r.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '');
    const subject = /Paint (.+)/.exec(said)?.[1];
    return subject ? { toolCalls: [{ id: 'call_paint', name: 'flux_dev', arguments: JSON.stringify({ prompt: subject }) }] } : undefined;
  });
  t = await start.app({
    llm: { baseUrl: llm.baseUrl },
    deployments: { leaseMs: 1_500, telegram: { apiUrl: tg.apiUrl, pollTimeoutS: 1 } },
  });
  alice = await t.createUser('alice');
  await t.db.$transaction((tx) => credit(tx, { userId: alice.id, kind: 'forever', amount: '50', reason: 'purchase' }));
});

/** An agent of alice's whose every flux_dev call waits for her answer, deployed to a new bot with `config`. */
async function deployed(config: Record<string, unknown>) {
  const agent = await fixtures(t).agent(alice, {
    public: false,
    tools: { flux_dev: true },
    toolApproval: { tools: { flux_dev: 'always' } },
  });
  const token = tg.addBot();
  const res = await t.rest('POST', `/v2/agents/${agent.id}/deployments`, {
    key: alice.apiKey,
    body: { platform: 'telegram', secrets: { telegram: { token } }, config },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  await tg.until(() => tg.polling(token).now === 1, 20_000, 'the deployment to poll');
  return { token };
}

/** Ann asks for a painting; resolves once the chat is told the call waits. */
async function asked(token: string, chat: TgChat, subject: string) {
  const asking = tg.message(token, chat, ann, `Paint ${subject}`);
  const ask = await tg.until(
    () => tg.answersTo(chat.id, asking).find((m) => m.text.includes('flux_dev')),
    20_000,
    'the chat to be asked for approval',
  );
  const task = await t.db.task.findFirstOrThrow({ where: { status: 'awaiting_approval', args: { equals: { prompt: subject } } } });
  return { asking, ask, task };
}

/** The bot's answer to the message, once its text is the reply's whole text: with the painting, or without when it was not made. */
const finalAnswer = (chat: TgChat, messageId: number, painted = true) =>
  tg.until(
    () => tg.answersTo(chat.id, messageId).find((m) => (painted ? /^Here it is\.\n\n\S+\/media\//.test(m.text) : m.text === 'Here it is.')),
    20_000,
    'the reply to end in the chat',
  );

const pressAnswer = (id: string) => tg.until(() => tg.pressed(id)?.answer, 30_000, 'the press to be answered').then((a) => a.text);

/** The asking message once it has no buttons and reads `outcome` last. */
const settledAsk = (chat: TgChat, ask: BotMessage, outcome: string) =>
  tg.until(
    () => {
      const m = tg.sentIn(chat.id).find((s) => s.message_id === ask.message_id);
      return m && m.keyboard === null && m.text.endsWith(outcome) && m;
    },
    20_000,
    `the buttons to go and "${outcome}" to show`,
  );

async function ledgerAddsUp() {
  const row = await t.db.user.findUniqueOrThrow({ where: { id: alice.id } });
  const rows = await t.db.mannaLedger.findMany({ where: { userId: alice.id } });
  const sum = rows.reduce((s, r) => s + r.amount.toNumber(), 0);
  const balance = row.subscriptionBalance.toNumber() + row.foreverBalance.toNumber();
  expect(sum).toBe(balance);
  return balance;
}

const callOf = (id: string) => t.db.task.findUniqueOrThrow({ where: { id } });

describe('a tool call that waits for approval, in a Telegram chat', () => {
  it("is asked in the chat with the tool, its arguments, price and deadline; the approver's Approve runs it, paid, and the reply ends in the chat", async () => {
    const { token } = await deployed({ telegram: { approver_user_id: '501' } });
    const chat = privateChat();
    const before = await ledgerAddsUp();
    const { asking, ask, task } = await asked(token, chat, 'a lighthouse');
    expect(ask.text).toContain('flux_dev, for 1 manna');
    expect(ask.text).toContain('Arguments: {"prompt":"a lighthouse"}');
    expect(ask.text).toMatch(/Unanswered by \d{4}-\d\d-\d\d \d\d:\d\d UTC, it counts as denied\./);
    expect(ask.keyboard?.flat().map((b) => b.text)).toEqual(['Approve', 'Deny']);
    for (const b of ask.keyboard!.flat()) expect(b.callback_data).toContain(task.id);
    expect(await ledgerAddsUp()).toBe(before);

    const press = tg.press(token, chat, ann, ask.message_id, 'Approve');
    expect(await pressAnswer(press)).toBe('Approved');
    const answer = await finalAnswer(chat, asking);
    expect(answer.text).toMatch(/^Here it is\.\n\nhttp:\/\/127\.0\.0\.1:\d+\/media\/[\w-]+\.png$/);
    // The chat's answer is the reply's whole text, sent once after the pause.
    expect(tg.answersTo(chat.id, asking).filter((m) => m.keyboard === null && m.message_id !== ask.message_id)).toHaveLength(1);
    await settledAsk(chat, ask, 'Approved.');
    expect(await callOf(task.id)).toMatchObject({ status: 'completed', approval: 'approved' });
    expect(await ledgerAddsUp()).toBe(before - 1);
  });

  it("the approver's Deny: nothing runs or is charged, the model is told, the reply ends in the chat", async () => {
    const { token } = await deployed({ telegram: { approver_user_id: 501 } });
    const chat = privateChat();
    const before = await ledgerAddsUp();
    const { asking, ask, task } = await asked(token, chat, 'a storm');
    expect(await pressAnswer(tg.press(token, chat, ann, ask.message_id, 'Deny'))).toBe('Denied');
    await finalAnswer(chat, asking, false);
    await settledAsk(chat, ask, 'Denied.');
    expect(await callOf(task.id)).toMatchObject({ status: 'failed', approval: 'denied' });
    const told = llm.replyRequests().find((r) => toolAnswer(r)?.includes('Denied'));
    expect(JSON.parse(toolAnswer(told!)!)).toEqual({ error: 'Denied by the user who pays for it' });
    expect(await ledgerAddsUp()).toBe(before);
  });

  it("anyone else's press is refused and changes nothing", async () => {
    const { token } = await deployed({ telegram: { approver_user_id: '501' } });
    const chat: TgChat = { id: -100777, type: 'supergroup', title: 'Painters' };
    const before = await ledgerAddsUp();
    const { asking, ask, task } = await asked(token, chat, 'a harbour');
    expect(await pressAnswer(tg.press(token, chat, ben, ask.message_id, 'Approve'))).toBe(
      "Not yours: only the owner's approver can answer this",
    );
    expect(await pressAnswer(tg.press(token, chat, ben, ask.message_id, 'Deny'))).toMatch(/^Not yours/);
    expect(await callOf(task.id)).toMatchObject({ status: 'awaiting_approval', approval: 'requested' });
    expect(tg.sentIn(chat.id).find((m) => m.message_id === ask.message_id)?.keyboard).not.toBeNull();
    expect(await ledgerAddsUp()).toBe(before);
    // The approver still can.
    expect(await pressAnswer(tg.press(token, chat, ann, ask.message_id, 'Approve'))).toBe('Approved');
    await finalAnswer(chat, asking);
    expect(await ledgerAddsUp()).toBe(before - 1);
  });

  it('settled elsewhere (REST): the buttons go, and a press from a screen that still shows them is told it was settled already', async () => {
    const { token } = await deployed({ telegram: { approver_user_id: '501' } });
    const chat = privateChat();
    const before = await ledgerAddsUp();
    const { asking, ask, task } = await asked(token, chat, 'a gull');
    const shown = ask.keyboard!;
    const settled = await t.rest('POST', `/v2/sessions/${task.sessionId}/approvals/${task.id}`, {
      key: alice.apiKey,
      body: { approve: false, reason: 'not today' },
    });
    expect(settled.status).toBe(200);
    await settledAsk(chat, ask, 'Denied.');
    expect(await pressAnswer(tg.press(token, chat, ann, ask.message_id, 'Approve', shown))).toBe('Already settled');
    await finalAnswer(chat, asking, false);
    expect(await callOf(task.id)).toMatchObject({ status: 'failed', approval: 'denied' });
    expect(tg.sentIn(chat.id).find((m) => m.message_id === ask.message_id)?.keyboard).toBeNull();
    expect(await ledgerAddsUp()).toBe(before);
  });

  it('with no approver set, the chat is told the call waits for the owner in the app, with no buttons', async () => {
    const { token } = await deployed({});
    const chat = privateChat();
    const { asking, ask, task } = await asked(token, chat, 'a cliff');
    expect(ask.text).toContain("It waits for the owner's answer in the app.");
    expect(ask.keyboard).toBeNull();
    const settled = await t.rest('POST', `/v2/sessions/${task.sessionId}/approvals/${task.id}`, {
      key: alice.apiKey,
      body: { approve: true },
    });
    expect(settled.status).toBe(200);
    await finalAnswer(chat, asking);
    await settledAsk(chat, ask, 'Approved.');
  });

  it('refuses an approver that is no Telegram user id, saving nothing', async () => {
    const agent = await fixtures(t).agent(alice, { public: false });
    for (const approver of ['ann', -5, 1.5]) {
      const res = await t.rest('POST', `/v2/agents/${agent.id}/deployments`, {
        key: alice.apiKey,
        body: { platform: 'telegram', config: { telegram: { approver_user_id: approver } } },
      });
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.body)).toContain('approver_user_id');
    }
    expect(await t.db.deployment.count({ where: { agentId: agent.id } })).toBe(0);
  });
});
