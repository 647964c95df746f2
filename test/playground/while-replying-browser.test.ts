import type { Browser, Page } from 'puppeteer-core';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { launchChromium, recordingPage } from '../helpers/browser.ts';
import { type FakeOpenAI, isMemoryRequest, isTitleRequest, type RecordedRequest } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * A person writes while an agent is still replying, in the playground, in Debian's Chromium
 * against a real server and the fake model: "Stop and send" interrupts the reply, "Send" queues
 * the message after it, and the ▾ menu's "Discard the reply and send" rolls it back. Each reply
 * that is to be written over streams slowly and is held after three tokens, so "while it
 * replies" does not depend on timing; the test waits on what the page shows.
 */
let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let browser: Browser;

/** A reply that is held after its third token: `release` lets it go on (or never, for one that is stopped). */
function heldReply(asks: string, tokens: string[]) {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  return { asks, tokens, release, script: { tokens, delayMs: 20, gate: (i: number) => (i >= 3 ? held : undefined) } };
}
const answer = (asks: string, tokens: string[]) => ({ asks, tokens, script: { tokens, delayMs: 20 } });

const TIDES = heldReply('When is high tide today?', [' High', ' tide', ' is', ' at', ' six', ' tonight', '.']);
const MOON = answer('Forget the tides: how full is the moon?', [' Nearly', ' full', ',', ' waxing', '.']);
const PIER = heldReply('Is the pier lit at night?', [' Yes', ',', ' the', ' pier', ' has', ' lamps', '.']);
const LOCK = answer('And are the lock gates open?', [' They', ' open', ' at', ' dawn', '.']);
const STORM = heldReply('Describe the storm coming in.', [' Dark', ' clouds', ' gather', ' over', ' the', ' bay', '.']);
const TOMORROW = answer('Never mind the storm; what about tomorrow?', [' Calm', ' and', ' clear', '.']);
const SCRIPTED = [TIDES, MOON, PIER, LOCK, STORM, TOMORROW];

const lastSaid = (r: RecordedRequest) => String(r.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '');

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['OK', '.'] });
  llm.choose((r) => {
    if (isTitleRequest(r) || isMemoryRequest(r)) return undefined;
    return SCRIPTED.find((s) => lastSaid(r) === s.asks)?.script;
  });
  t = await start.app({ llm: { baseUrl: llm.baseUrl } });
  alice = await t.createUser('alice');
  await fixtures(t).agent(alice, { name: 'Tide Keeper', public: false });
  browser = (await start.service(launchChromium())).browser;
});

/** The replies on the page, in order: status and text. */
const replies = (page: Page) =>
  page.$$eval('article.message[data-role="ASSISTANT"]', (els) =>
    els.map((el) => [el.getAttribute('data-status') ?? '', el.querySelector('.content')?.textContent ?? '']),
  );
const userMessages = (page: Page) =>
  page.$$eval('article.message[data-role="USER"] .content', (els) => els.map((el) => (el as HTMLElement).textContent));

/** Waits until the page shows exactly these replies (status and text), in order. */
const showsReplies = (page: Page, expected: string[][]) =>
  page.waitForFunction(
    (want) => {
      const shown = [...document.querySelectorAll('article.message[data-role="ASSISTANT"]')].map((el) => [
        el.getAttribute('data-status'),
        (el.querySelector('.content') as HTMLElement).textContent,
      ]);
      return JSON.stringify(shown) === JSON.stringify(want);
    },
    { polling: 50 },
    expected,
  );

/** What the server saved in the session: role, status and text. */
async function saved(sessionId: string): Promise<{ role: string; status: string; content: string }[]> {
  const response = await fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': alice.apiKey },
    body: JSON.stringify({
      query: 'query($id: ID!) { session(id: $id) { messages(last: 50) { edges { node { role status content } } } } }',
      variables: { id: sessionId },
    }),
  });
  const body = await response.json();
  return body.data.session.messages.edges.map((e: { node: { role: string; status: string; content: string } }) => e.node);
}

/** Nothing in the page says something went wrong: no banner, no error under a message, nothing thrown. */
async function noErrorShown(page: Page, problems: string[]) {
  expect(await page.$('[data-problem]')).toBeNull();
  expect(await page.$$eval('.session .error', (els) => els.map((el) => (el as HTMLElement).textContent))).toEqual([]);
  expect(problems).toEqual([]);
}

describe('writing while an agent replies, in the playground', () => {
  // One visit, step by step: each test goes on from where the one before left the page.
  let page: Page;
  let problems: string[];
  let sessionId: string;
  const held = (r: ReturnType<typeof heldReply>) => [['STREAMING', r.tokens.slice(0, 3).join('')]];

  it('stops the reply being written and answers the new message with "Stop and send"', async () => {
    ({ page, problems } = await recordingPage(browser, { width: 1280, height: 860 }));
    await page.evaluateOnNewDocument((key) => localStorage.setItem('parley.apiKey', key), alice.apiKey);
    await page.goto(`${t.url}/playground/#/`, { waitUntil: 'load' });
    await page.waitForSelector('li[data-agent="Tide Keeper"] input[type="checkbox"]');
    await page.click('li[data-agent="Tide Keeper"] input[type="checkbox"]');
    await page.type('.new-session textarea[name="message"]', TIDES.asks);
    await page.click('.new-session button[type="submit"]');
    await page.waitForSelector('.session[data-session-id]');
    sessionId = await page.$eval('.session', (el) => el.getAttribute('data-session-id')!);

    // Nothing is being written yet: one way to send. Then the reply streams, and is held.
    await showsReplies(page, held(TIDES));
    await page.type('.session textarea[name="message"]', MOON.asks);
    expect(await page.$eval('.session .composer-hint', (el) => (el as HTMLElement).textContent)).toMatch(/Stop and send interrupts/);
    await page.click('.session button[name="interrupt"]');

    // The reply keeps what it had written, marked interrupted, and the new message is answered.
    await showsReplies(page, [
      ['INTERRUPTED', ' High tide is'],
      ['COMPLETE', MOON.tokens.join('')],
    ]);
    expect(await userMessages(page)).toEqual([TIDES.asks, MOON.asks]);
    expect(await page.$eval('article.message[data-status="INTERRUPTED"] header', (el) => (el as HTMLElement).textContent)).toMatch(
      /interrupted/,
    );
    // Why it stopped is said plainly, not as an error: the person asked for it.
    expect(await page.$eval('article.message[data-status="INTERRUPTED"] .stopped', (el) => el.textContent)).toBe(
      'Interrupted by a newer prompt',
    );
    // The reply is over: the extra ways to send are gone.
    await page.waitForFunction(() => !document.querySelector('.session button[name="interrupt"]'), { polling: 50 });
    expect(await page.$('.session .composer-hint')).toBeNull();
    await noErrorShown(page, problems);

    // The server holds what the page shows, and the model was given the interrupted text.
    // (The session's first line says the agent joined.)
    expect((await saved(sessionId)).slice(1).map((m) => [m.role, m.status, m.content])).toEqual([
      ['USER', 'COMPLETE', TIDES.asks],
      ['ASSISTANT', 'INTERRUPTED', ' High tide is'],
      ['USER', 'COMPLETE', MOON.asks],
      ['ASSISTANT', 'COMPLETE', MOON.tokens.join('')],
    ]);
    const moonAsked = llm.replyRequests().find((r) => lastSaid(r) === MOON.asks)!;
    expect(moonAsked.body.messages.some((m) => m.role === 'assistant' && m.content === ' High tide is [interrupted]')).toBe(true);
  });

  it('queues a message sent with "Send" while a reply is written, and answers it after', async () => {
    await page.type('.session textarea[name="message"]', PIER.asks);
    await page.keyboard.press('Enter');
    await showsReplies(page, [...(await replies(page)).slice(0, 2), ...held(PIER)]);

    await page.type('.session textarea[name="message"]', LOCK.asks);
    await page.click('.session button[type="submit"]');
    // Its message is there at once; its reply waits for the one being written, and says so.
    await page.waitForFunction(
      (asks) => document.querySelectorAll('article.message[data-role="USER"] .content')[3]?.textContent === asks,
      {
        polling: 50,
      },
      LOCK.asks,
    );
    await page.waitForFunction(
      () =>
        document.querySelectorAll('article.message[data-role="ASSISTANT"]')[3]?.querySelector('.typing')?.textContent ===
        'waiting for the reply before',
      { polling: 50 },
    );
    expect((await replies(page)).slice(2)).toEqual([...held(PIER), ['STREAMING', '']]);
    expect(llm.replyRequests().some((r) => lastSaid(r) === LOCK.asks)).toBe(false);

    PIER.release();
    await showsReplies(page, [
      ['INTERRUPTED', ' High tide is'],
      ['COMPLETE', MOON.tokens.join('')],
      ['COMPLETE', PIER.tokens.join('')],
      ['COMPLETE', LOCK.tokens.join('')],
    ]);
    expect((await userMessages(page)).slice(2)).toEqual([PIER.asks, LOCK.asks]);
    // The queued message was answered with the whole reply before it in view.
    const lockAsked = llm.replyRequests().find((r) => lastSaid(r) === LOCK.asks)!;
    expect(lockAsked.body.messages.some((m) => m.role === 'assistant' && m.content === PIER.tokens.join(''))).toBe(true);
    await noErrorShown(page, problems);
  });

  it('removes the reply being written and answers as if it never ran with "Discard the reply and send"', async () => {
    await page.type('.session textarea[name="message"]', STORM.asks);
    await page.keyboard.press('Enter');
    const before = (await replies(page)).slice(0, 4);
    await showsReplies(page, [...before, ...held(STORM)]);

    await page.type('.session textarea[name="message"]', TOMORROW.asks);
    expect(await page.$('.session button[name="rollback"]')).toBeNull();
    await page.click('.session button[name="more"]');
    await page.click('.session button[name="rollback"]');

    await showsReplies(page, [...before, ['COMPLETE', TOMORROW.tokens.join('')]]);
    expect((await userMessages(page)).slice(4)).toEqual([STORM.asks, TOMORROW.asks]);
    await noErrorShown(page, problems);
    const savedNow = await saved(sessionId);
    expect(savedNow.filter((m) => m.role === 'ASSISTANT').map((m) => m.content)).toEqual([
      ' High tide is',
      MOON.tokens.join(''),
      PIER.tokens.join(''),
      LOCK.tokens.join(''),
      TOMORROW.tokens.join(''),
    ]);
    // The model never saw the discarded reply.
    const tomorrowAsked = llm.replyRequests().find((r) => lastSaid(r) === TOMORROW.asks)!;
    expect(tomorrowAsked.body.messages.some((m) => m.role === 'assistant' && String(m.content).includes('Dark clouds'))).toBe(false);
    await page.close();
  });
});
