import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'puppeteer-core';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { launchChromium, recordingPage } from '../helpers/browser.ts';
import { type FakeOpenAI, isMemoryRequest, isTitleRequest, type RecordedRequest } from '../helpers/fake-openai.ts';
import { type FakeTelegram, startFakeTelegram, type TgChat, type TgUser } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * An agent's owner deploys it to (the fake) Telegram in the playground, in Debian's Chromium
 * against a real server: a token Telegram refuses, one it accepts, a person writing to the bot,
 * the session that chat becomes, the next reply streaming in it, and a stop. That reply is held
 * mid-stream by the fake model until the page shows it being written, so "live" does not depend
 * on timing.
 */
let t: TestApp;
let tg: FakeTelegram;
let llm: FakeOpenAI;
let alice: TestUser;
let agentId: string;
let browser: Browser;

/** What Ann asks on Telegram, and the model's answers, token by token. */
const FIRST = { asks: 'Is the harbour open tonight?', tokens: [' Yes', ',', ' until', ' midnight', '.'] };
const NEXT = { asks: 'Can I moor at the north pier?', tokens: [' The', ' north', ' pier', ' is', ' free', ' tonight', '.'] };
let release!: () => void;
const held = new Promise<void>((resolve) => (release = resolve));

const ann: TgUser = { id: 501, first_name: 'Ann', last_name: 'Lee', username: 'annlee' };
const chat: TgChat = { id: 4242, type: 'private', first_name: 'Ann', last_name: 'Lee' };

const lastSaid = (r: RecordedRequest) => String(r.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '');

setUp(async (start) => {
  tg = await start.service(startFakeTelegram());
  llm = await start.fakeOpenAI({ tokens: ['OK', '.'] });
  // The answer to the next question stops after three tokens until the test lets it go on.
  llm.choose((r) => {
    if (isTitleRequest(r) || isMemoryRequest(r)) return undefined;
    if (lastSaid(r).includes(NEXT.asks)) return { tokens: NEXT.tokens, gate: (i) => (i >= 3 ? held : undefined) };
    return lastSaid(r).includes(FIRST.asks) ? { tokens: FIRST.tokens } : undefined;
  });
  t = await start.app({
    llm: { baseUrl: llm.baseUrl },
    deployments: { leaseMs: 1_500, telegram: { apiUrl: tg.apiUrl, pollTimeoutS: 1 } },
  });
  alice = await t.createUser('alice');
  agentId = (await fixtures(t).agent(alice, { name: 'Harbour Master', public: false })).id;
  browser = (await start.service(launchChromium())).browser;
});

/** Operation 15 as its raw body and parsed. */
async function listed() {
  const response = await fetch(`${t.url}/v2/agents/deployments`, { headers: { 'x-api-key': alice.apiKey } });
  const text = await response.text();
  expect(response.status).toBe(200);
  return { text, deployments: JSON.parse(text).deployments as Record<string, any>[] };
}

/** What the server saved in a session, through GraphQL as the page reads it. */
async function savedMessages(sessionId: string): Promise<{ role: string; content: string }[]> {
  const response = await fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': alice.apiKey },
    body: JSON.stringify({
      query: 'query($id: ID!) { session(id: $id) { messages(last: 20) { edges { node { role content } } } } }',
      variables: { id: sessionId },
    }),
  });
  const body = await response.json();
  return body.data.session.messages.edges.map((e: { node: { role: string; content: string } }) => e.node);
}

const textOf = (page: Page, selector: string) => page.$eval(selector, (el) => (el as HTMLElement).innerText);

async function typeToken(page: Page, token: string) {
  await page.type('.deploy-form input[name="telegram-token"]', token);
  await page.click('.deploy-form button[name="deploy"]');
}

describe('deploying an agent to Telegram in the playground', () => {
  // One visit, step by step: each test goes on from where the one before left the page.
  let page: Page;
  let requested: string[];
  let problems: string[];
  const refusedToken = `${7_100_000_000 + Math.floor(Math.random() * 1_000_000)}:${randomBytes(27).toString('base64url')}`;
  let token: string;
  let sessionId: string;

  it('refuses a token Telegram does not accept, in words, and stores nothing', async () => {
    ({ page, requested, problems } = await recordingPage(browser, { width: 1280, height: 860 }));
    await page.evaluateOnNewDocument((key) => localStorage.setItem('parley.apiKey', key), alice.apiKey);
    await page.goto(`${t.url}/playground/#/`, { waitUntil: 'load' });
    await page.waitForSelector('li[data-agent="Harbour Master"] a.deploy-link');
    await page.click('li[data-agent="Harbour Master"] a.deploy-link');
    await page.waitForSelector('.deploy-form input[name="telegram-token"]');
    expect(await page.$eval('.deploy-form input[name="telegram-token"]', (el) => (el as HTMLInputElement).type)).toBe('password');
    expect(await page.$('.deployment')).toBeNull();

    await typeToken(page, refusedToken);
    await page.waitForSelector('[data-refusal]');
    expect(await textOf(page, '[data-refusal]')).toBe('Not deployed: Telegram refused this bot token (getMe answered Unauthorized)');
    // The service asked Telegram, and the field was emptied.
    expect(tg.calls(refusedToken, 'getMe')).toHaveLength(1);
    expect(await page.$eval('.deploy-form input[name="telegram-token"]', (el) => (el as HTMLInputElement).value)).toBe('');
    expect(await page.$('.deployment')).toBeNull();
    expect((await listed()).deployments).toEqual([]);
  });

  it('deploys with a token Telegram accepts and shows it running, as the live feed tells it', async () => {
    token = tg.addBot('harbour_master_bot');
    await typeToken(page, token);
    await page.waitForSelector('.deployment[data-state="RUNNING"]');
    expect(await page.$('[data-refusal]')).toBeNull();
    expect(await textOf(page, '.deployment h3')).toBe('Telegram @harbour_master_bot running');
    await page.waitForSelector('.state-changes li[data-change-state="RUNNING"]');
    await tg.until(() => tg.polling(token).now === 1, 20_000, 'the deployment to poll');
  });

  /** The bot's one answer on Telegram to a message, once it is `text`. */
  const answeredOnTelegram = (messageId: number, text: string) =>
    tg.until(
      () => {
        const answers = tg.answersTo(chat.id, messageId);
        return answers.length === 1 && answers[0]!.text === text && answers[0]!;
      },
      20_000,
      `the answer "${text}" on Telegram`,
    );
  const userMessages = (page: Page) =>
    page.$$eval('article.message[data-role="USER"]', (els) =>
      els.map((el) => [
        (el.querySelector('header strong') as HTMLElement).innerText,
        (el.querySelector('.content') as HTMLElement).innerText,
      ]),
    );
  const replies = (page: Page) =>
    page.$$eval('article.message[data-role="ASSISTANT"]', (els) =>
      els.map((el) => [el.getAttribute('data-status'), (el.querySelector('.content') as HTMLElement).innerText]),
    );

  it('shows the session a Telegram chat becomes in the list, and opens it with the conversation as saved', async () => {
    const asked = tg.message(token, chat, ann, FIRST.asks);
    await page.waitForSelector(`.chats li[data-chat="${chat.id}"] a.chat-session`);
    sessionId = await page.$eval(`.chats li[data-chat="${chat.id}"]`, (el) => el.getAttribute('data-session-id')!);
    expect(await textOf(page, `.chats li[data-chat="${chat.id}"]`)).toBe('Ann Lee open session');

    // It appears in the list of sessions on the left as well.
    const listed = `aside .sessions a[href="#/session/${encodeURIComponent(sessionId)}"]`;
    await page.waitForSelector(listed);
    expect(await textOf(page, listed)).toBe('Ann Lee (telegram)');
    // Ann has the whole answer on Telegram: the reply is over, and the owner opens the session.
    await answeredOnTelegram(asked, 'Yes, until midnight.');
    await page.click(listed);
    await page.waitForSelector(`.session[data-session-id="${sessionId}"] article.message[data-role="ASSISTANT"][data-status="COMPLETE"]`);
    expect(await userMessages(page)).toEqual([['Ann Lee (telegram 501)', FIRST.asks]]);
    expect(await replies(page)).toEqual([['COMPLETE', FIRST.tokens.join('')]]);
  });

  it("shows Ann's next message and the reply streaming in the open session while Telegram receives it", async () => {
    const asked = tg.message(token, chat, ann, NEXT.asks);
    // Her message arrives live, then the reply, held after three tokens: it is being written.
    await page.waitForFunction(
      (sel, text) => {
        const el = document.querySelectorAll(sel)[1];
        return el?.getAttribute('data-status') === 'STREAMING' && (el.querySelector('.content') as HTMLElement).innerText === text;
      },
      { polling: 50 },
      'article.message[data-role="ASSISTANT"]',
      NEXT.tokens.slice(0, 3).join(''),
    );
    expect(await userMessages(page)).toEqual([
      ['Ann Lee (telegram 501)', FIRST.asks],
      ['Ann Lee (telegram 501)', NEXT.asks],
    ]);
    release();
    await page.waitForFunction(
      () => document.querySelectorAll('article.message[data-role="ASSISTANT"]')[1]?.getAttribute('data-status') === 'COMPLETE',
      { polling: 50 },
    );
    const saved = (await savedMessages(sessionId)).filter((m) => m.role === 'ASSISTANT').map((m) => m.content);
    expect(saved).toEqual([FIRST.tokens.join(''), NEXT.tokens.join('')]);
    expect(await replies(page)).toEqual(saved.map((text) => ['COMPLETE', text]));
    // Ann has the same reply on Telegram, as one answer to her message.
    await answeredOnTelegram(asked, 'The north pier is free tonight.');
  });

  it('stops the deployment and shows it stopped; operation 15 holds what the page showed, and the token is nowhere', async () => {
    await page.click('li[data-agent="Harbour Master"] a.deploy-link');
    await page.waitForSelector('.deployment[data-state="RUNNING"]');
    await page.click('.deployment button[name="stop"]');
    await page.waitForSelector('.deployment[data-state="STOPPED"]');
    // The change came on the live feed too, and Telegram is no longer read.
    await page.waitForSelector('.state-changes li[data-change-state="STOPPED"]');
    await tg.until(() => tg.polling(token).now === 0, 20_000, 'polling to stop');

    const shown = await page.$eval('.deployment', (el) => ({
      id: el.getAttribute('data-deployment-id'),
      valid: el.getAttribute('data-valid'),
      heading: (el.querySelector('h3') as HTMLElement).innerText,
      chats: [...el.querySelectorAll('.chats li')].map((li) => li.getAttribute('data-chat')),
    }));
    expect(shown.heading).toBe('Telegram @harbour_master_bot stopped');
    const { text, deployments } = await listed();
    expect(deployments).toEqual([
      expect.objectContaining({
        id: shown.id,
        agent: agentId,
        user: alice.id,
        platform: 'telegram',
        state: 'stopped',
        valid: shown.valid === 'true',
        last_error: null,
        account: '@harbour_master_bot',
      }),
    ]);
    const chats = await t.db.deploymentChat.findMany({ where: { deploymentId: shown.id! }, select: { conversationId: true } });
    expect(chats.map((c) => c.conversationId)).toEqual(shown.chats);

    // Neither token, nor its secret half, in the page, its storage, the addresses it asked, or operation 15.
    const storage = await page.evaluate(() => JSON.stringify([{ ...localStorage }, { ...sessionStorage }]));
    const html = await page.content();
    for (const secret of [token, refusedToken].flatMap((k) => [k, k.split(':')[1]!])) {
      expect(html).not.toContain(secret);
      expect(storage).not.toContain(secret);
      expect(text).not.toContain(secret);
      for (const url of requested) expect(url).not.toContain(secret);
    }
  });

  it('deletes the deployment, and loaded everything from the service itself with nothing refused or thrown', async () => {
    await page.click('.deployment button[name="delete"]');
    await page.waitForFunction(() => !document.querySelector('.deployment'), { polling: 50 });
    expect((await listed()).deployments).toEqual([]);

    const origin = new URL(t.url).origin;
    for (const url of requested) expect(new URL(url).origin).toBe(origin);
    expect(await page.$('[data-problem]')).toBeNull();
    expect(problems).toEqual([]);
    await page.close();
  });
});
