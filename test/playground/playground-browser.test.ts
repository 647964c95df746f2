import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'puppeteer-core';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { launchChromium, recordingPage } from '../helpers/browser.ts';
import { setUp } from '../helpers/set-up.ts';
import { searchableCreation } from '../search/support.ts';

/**
 * The playground as a person uses it, in Debian's Chromium against a real server: a key, an
 * agent, a session, a reply streaming in token by token, a second tab watching, a reload in the
 * middle of a reply. Replies come from the offline responder, paced so that "mid-reply" lasts
 * seconds; the test waits on what the page shows, never on time.
 */
let t: TestApp;
let alice: TestUser;
let browser: Browser;
// The picture in docs/playground.md, taken again only when asked: a test run leaves the tree as it found it.
const screenshot = process.env.UPDATE_SCREENSHOT ? fileURLToPath(new URL('../../docs/playground.png', import.meta.url)) : null;

setUp(async (start) => {
  t = await start.app({ llm: { offlineTokenDelayMs: 60 } });
  alice = await t.createUser('alice');
  browser = (await start.service(launchChromium())).browser;
});

/** A page that records every request it makes and everything its policy blocks or its scripts throw. */
async function openPage(): Promise<{ page: Page; requested: string[]; problems: string[] }> {
  const { page, requested, problems } = await recordingPage(browser, { width: 1280, height: 860 });
  page.on('console', (m) => process.env.DEBUG_PAGES && console.log('page:', m.text()));
  await page.evaluateOnNewDocument(() => {
    document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP: ${e.violatedDirective} ${e.blockedURI}`));
  });
  page.on('console', (m) => m.type() === 'error' && /CSP/.test(m.text()) && problems.push(m.text()));
  return { page, requested, problems };
}

/** The reply messages on a page: id, status and text, in order. */
const replies = (page: Page) =>
  page.$$eval('article.message[data-role="ASSISTANT"]', (els) =>
    els.map((el) => ({
      id: el.getAttribute('data-message-id')!,
      status: el.getAttribute('data-status')!,
      text: (el.querySelector('.content') as HTMLElement).innerText,
    })),
  );

/** Waits until the page shows reply number `index` streaming with at least `chars` characters. */
const streamingReply = (page: Page, index: number, chars: number) =>
  page.waitForFunction(
    (i, n) => {
      const el = document.querySelectorAll('article.message[data-role="ASSISTANT"]')[i];
      return el?.getAttribute('data-status') === 'STREAMING' && (el.querySelector('.content') as HTMLElement).innerText.length >= n;
    },
    // Polling, not animation frames: a tab in the background paints nothing but still runs.
    { timeout: 30_000, polling: 50 },
    index,
    chars,
  );

const completeReply = (page: Page, index: number) =>
  page.waitForFunction(
    (i) => document.querySelectorAll('article.message[data-role="ASSISTANT"]')[i]?.getAttribute('data-status') === 'COMPLETE',
    // Polling, not animation frames: a tab in the background paints nothing but still runs.
    { timeout: 30_000, polling: 50 },
    index,
  );

/** What the server saved for the session's replies. */
async function savedReplies(sessionId: string): Promise<{ id: string; content: string }[]> {
  const response = await fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': alice.apiKey },
    body: JSON.stringify({
      query: 'query($id: ID!) { session(id: $id) { messages(last: 50) { edges { node { id role content } } } } }',
      variables: { id: sessionId },
    }),
  });
  const body = await response.json();
  return body.data.session.messages.edges.map((e: any) => e.node).filter((m: any) => m.role === 'ASSISTANT');
}

async function send(page: Page, text: string) {
  // Clicks and keys go to the tab in front, as they would for a person.
  await page.bringToFront();
  await page.type('.session textarea[name="message"]', text);
  await page.click('.session button[type="submit"]');
}

describe('the playground in a real browser', () => {
  // One visit, step by step: each test goes on from where the one before left the pages.
  let page: Page;
  let requested: string[];
  let problems: string[];
  let second: Awaited<ReturnType<typeof openPage>>;
  let sessionId: string;

  it('refuses a wrong key in words, takes a right one, and shows who you are', async () => {
    ({ page, requested, problems } = await openPage());
    const first = await page.goto(`${t.url}/`, { waitUntil: 'load' });
    expect(new URL(page.url()).pathname).toBe('/playground/');
    const csp = first!.headers()['content-security-policy'];
    expect(csp).toMatch(/script-src 'self'/);
    expect(csp).toMatch(/connect-src 'self'/);

    // A wrong key is refused in words, and the key form stays.
    await page.waitForSelector('input[name="key"]');
    await page.type('input[name="key"]', 'pk_not_a_real_key');
    await page.click('.key-form button[type="submit"]');
    await page.waitForSelector('[data-problem="key"]');
    expect(await page.$eval('[data-problem="key"]', (el) => (el as HTMLElement).innerText)).toMatch(/not accepted/);

    await page.$eval('input[name="key"]', (el) => ((el as HTMLInputElement).value = ''));
    await page.type('input[name="key"]', alice.apiKey);
    await page.click('.key-form button[type="submit"]');
    await page.waitForSelector('.whoami[data-username="alice"]');
    expect(await page.$eval('.whoami', (el) => (el as HTMLElement).innerText)).toMatch(/alice · balance \d/);
  });

  it('creates an agent, starts a session with it, and shows the reply streaming token by token', async () => {
    await page.type('input[name="agent-name"]', 'Harbour Pilot');
    await page.type('textarea[name="agent-persona"]', 'A calm pilot who guides ships into the harbour at night.');
    await page.click('.create-agent button[type="submit"]');
    await page.waitForSelector('li[data-agent="Harbour Pilot"] input[type="checkbox"]');
    await page.click('li[data-agent="Harbour Pilot"] input[type="checkbox"]');
    await page.type('.new-session textarea[name="message"]', 'Which way to the lighthouse?');
    await page.click('.new-session button[type="submit"]');
    await page.waitForSelector('.session[data-session-id]');
    sessionId = await page.$eval('.session', (el) => el.getAttribute('data-session-id')!);

    // Tokens arrive: the reply grows while it is still being written.
    await streamingReply(page, 0, 20);
    const early = (await replies(page))[0]!.text.length;
    await streamingReply(page, 0, early + 10);
    if (screenshot) await page.screenshot({ path: screenshot });
    await completeReply(page, 0);
    const [saved1] = await savedReplies(sessionId);
    expect((await replies(page))[0]!.text).toBe(saved1!.content);
  });

  it('shows the next reply streaming in a second tab on the same session too', async () => {
    second = await openPage();
    await second.page.goto(`${t.url}/playground/#/session/${sessionId}`, { waitUntil: 'load' });
    await second.page.waitForFunction(() => document.querySelectorAll('article.message[data-role="ASSISTANT"]').length === 1, {
      polling: 50,
    });
    await send(page, 'And after that?');
    await streamingReply(second.page, 1, 10);
    await completeReply(second.page, 1);
    await completeReply(page, 1);
    const saved2 = (await savedReplies(sessionId))[1]!;
    expect((await replies(second.page))[1]!.text).toBe(saved2.content);
    expect((await replies(page))[1]!.text).toBe(saved2.content);

    // A reaction in one tab shows in the other.
    await page.bringToFront();
    await page.click(`article[data-message-id="${saved2.id}"] button[data-reaction="thumbs_up"]`);
    await second.page.waitForFunction(
      (id) => document.querySelector(`article[data-message-id="${id}"] button[data-reaction="thumbs_up"]`)?.textContent?.includes('1'),
      { polling: 50 },
      saved2.id,
    );
  });

  it('goes on with a reply after a reload in its middle, and ends it whole, once', async () => {
    await send(page, 'One more question.');
    await streamingReply(page, 2, 15);
    await page.reload({ waitUntil: 'load' });
    await completeReply(page, 2);
    const saved3 = (await savedReplies(sessionId))[2]!;
    const after = await replies(page);
    expect(after.map((r) => r.id)).toEqual((await savedReplies(sessionId)).map((r) => r.id));
    expect(after[2]!.text).toBe(saved3.content);
  });

  it('shares the session on a public page that someone without a key can read', async () => {
    await page.click('button[name="share"]');
    await page.waitForSelector('a.share-link');
    const shareHref = await page.$eval('a.share-link', (el) => (el as HTMLAnchorElement).href);
    const stranger = await browser.createBrowserContext();
    const publicPage = await stranger.newPage();
    await publicPage.goto(shareHref, { waitUntil: 'load' });
    await publicPage.waitForSelector('.share-page article.message');
    expect(await publicPage.$eval('.share-page', (el) => (el as HTMLElement).innerText)).toContain('Which way to the lighthouse?');
    await stranger.close();
  });

  it('lets the agents take turns on their own with the autonomy switch, until the turns it was given are spent', async () => {
    await page.bringToFront();
    await page.waitForSelector('.autonomy[data-autonomy="off"]');
    const before = (await replies(page)).length;
    // The session has no budget: the switch asks how many more turns they may take, and says the
    // turns taken so far (the opening replies) count.
    const spent = Number(await page.$eval('.autonomy [data-turns]', (el) => el.getAttribute('data-turns')));
    expect(spent).toBeGreaterThan(0);
    expect(await page.$eval('.autonomy', (el) => (el as HTMLElement).innerText)).toMatch(
      new RegExp(`stop after\\s*more turns[\\s\\S]*${spent} turns taken, the opening replies included`),
    );
    expect(await page.$eval('.autonomy input[name="more-turns"]', (el) => (el as HTMLInputElement).value)).toBe('10');
    await page.$eval('.autonomy input[name="more-turns"]', (el) => ((el as HTMLInputElement).value = ''));
    await page.type('.autonomy input[name="more-turns"]', '2');
    await page.$eval('.autonomy input[name="reply-interval"]', (el) => ((el as HTMLInputElement).value = ''));
    await page.type('.autonomy input[name="reply-interval"]', '0');
    await page.click('.autonomy input[name="auto-reply"]');
    await page.waitForSelector('.autonomy[data-autonomy="on"]');
    // Two replies nobody asked for stream in, and the switch says why it stopped.
    await page.waitForSelector('.autonomy [data-stop-reason="TURN_BUDGET"]', { timeout: 60_000 });
    await page.waitForSelector('.autonomy[data-autonomy="off"]');
    expect(await page.$eval('.autonomy [data-stop-reason]', (el) => (el as HTMLElement).innerText)).toBe(
      'Stopped: Session turn budget exceeded',
    );
    await completeReply(page, before + 1);
    const shown = await replies(page);
    const saved = await savedReplies(sessionId);
    expect(shown).toHaveLength(before + 2);
    expect(shown.map((r) => r.text)).toEqual(saved.map((r) => r.content));
  });

  it('loaded everything from the service itself, with nothing blocked or thrown', () => {
    const origin = new URL(t.url).origin;
    for (const url of [...requested, ...second.requested]) expect(new URL(url).origin).toBe(origin);
    expect([...problems, ...second.problems]).toEqual([]);
  });
});

describe('building a collection from search results in the playground', () => {
  it('finds creations by meaning, keeps the ticked ones in a new collection, then adds to it; the server holds what the page shows', async () => {
    const carol = await t.createUser('carol');
    const lighthouse = await searchableCreation(t, carol, { name: 'Lighthouse at dusk', prompt: 'a lighthouse at dusk by the sea' });
    const harbour = await searchableCreation(t, carol, { name: 'Harbour at night', prompt: 'boats in a harbour at night' });
    await searchableCreation(t, carol, { name: 'Mountain pass', prompt: 'snow on a mountain pass' });
    const { page, requested, problems } = await openPage();
    await page.evaluateOnNewDocument((key) => localStorage.setItem('parley.apiKey', key), carol.apiKey);
    await page.goto(`${t.url}/playground/#/collections`, { waitUntil: 'load' });

    const find = async (words: string, name: string) => {
      await page.waitForSelector('.collection-search input[name="search"]');
      await page.$eval('.collection-search input[name="search"]', (el) => ((el as HTMLInputElement).value = ''));
      await page.type('.collection-search input[name="search"]', words);
      await page.click('.collection-search button[type="submit"]');
      await page.waitForSelector(`.search-results li[data-creation="${name}"]`);
      await page.click(`.search-results li[data-creation="${name}"] input[type="checkbox"]`);
    };
    await find('lighthouse', 'Lighthouse at dusk');
    await page.type('.collection-save input[name="collection-name"]', 'Seaside');
    await page.click('.collection-save button[type="submit"]');
    await page.waitForSelector('.collections li[data-collection="Seaside"][data-count="1"]');

    // Into the collection just made, picked from the list of yours.
    await find('harbour', 'Harbour at night');
    const seaside = await page.$eval(
      '.collection-save select[name="target"]',
      (el) => [...(el as HTMLSelectElement).options].find((o) => o.text === 'Seaside')!.value,
    );
    await page.select('.collection-save select[name="target"]', seaside);
    await page.click('.collection-save button[type="submit"]');
    await page.waitForSelector('.collections li[data-collection="Seaside"][data-count="2"]');
    const shown = await page.$eval('.collections li[data-collection="Seaside"]', (el) =>
      [...el.querySelectorAll('ol li')].map((li) => (li as HTMLElement).innerText),
    );
    expect(shown).toEqual(['Lighthouse at dusk', 'Harbour at night']);
    // No request of the view was refused (the page shows a problem banner for any).
    expect(await page.$('[data-problem]')).toBeNull();

    const light = await t.rest('GET', '/v2/collections/light', { key: carol.apiKey });
    expect(light.body.collections).toEqual([expect.objectContaining({ name: 'Seaside', creations: [lighthouse.id, harbour.id] })]);
    const origin = new URL(t.url).origin;
    for (const url of requested) expect(new URL(url).origin).toBe(origin);
    expect(problems).toEqual([]);
    await page.close();
  });
});
