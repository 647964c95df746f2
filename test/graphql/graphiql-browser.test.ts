import type { Browser, Page } from 'puppeteer-core';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { launchChromium, recordingPage } from '../helpers/browser.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * GraphiQL as a person uses it: Debian's Chromium opens /graphql, the key goes into the
 * headers tab, a query runs, and a subscription shows a reply streaming in. Every request the
 * page makes must stay on the service's own origin (it must work offline), and nothing may
 * break its Content-Security-Policy.
 */
let t: TestApp;
let alice: TestUser;
let browser: Browser;

setUp(async (start) => {
  // The offline responder pauses between tokens, so the reply visibly streams.
  t = await start.app({ llm: { offlineTokenDelayMs: 30 } });
  alice = await t.createUser('alice');
  browser = (await start.service(launchChromium())).browser;
});

/** Replaces the text of a GraphiQL editor by typing into it, as a person would. */
async function typeInto(page: Page, selector: string, text: string) {
  // Near the start of the text: the middle of its lines lies off to the right when one is long.
  await page.click(`${selector} .view-lines`, { offset: { x: 30, y: 8 } });
  await page.keyboard.down('Control');
  await page.keyboard.press('KeyA');
  await page.keyboard.up('Control');
  await page.keyboard.press('Backspace');
  await page.keyboard.type(text);
}

const responseText = (page: Page) => page.$eval('.graphiql-response', (el) => (el as HTMLElement).innerText);

describe('GraphiQL in a real browser', () => {
  it('loads from the service alone, runs `me` with the key from the headers tab, and streams a subscription', async () => {
    const { page, requested, problems } = await recordingPage(browser, { width: 1400, height: 900 });
    page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));
    // Anything the Content-Security-Policy blocks (a script, style, font, worker or request).
    await page.evaluateOnNewDocument(() => {
      document.addEventListener('securitypolicyviolation', (e) =>
        ((window as unknown as { violations: string[] }).violations ??= []).push(`${e.violatedDirective} ${e.blockedURI}`),
      );
    });

    const page0 = await page.goto(`${t.url}/graphql`, { waitUntil: 'load' });
    expect(page0!.headers()['content-security-policy']).toMatch(/script-src 'self'/);
    await page.waitForSelector('.graphiql-query-editor .view-lines', { timeout: 20_000 });
    // It opens on parley's own document (who you are, the agents, a reply streaming), with the
    // key's place named, not on the stock welcome text.
    await page.waitForFunction(() => document.querySelector('.graphiql-query-editor .view-lines')?.textContent?.includes('query'), {
      timeout: 20_000,
    });
    const opening = await page.$eval('.graphiql-query-editor .view-lines', (el) => (el.textContent ?? '').replace(/\u00a0/g, ' '));
    expect(opening).toContain('Put your API key in Headers');
    expect(opening).toContain('query Me');
    expect(opening).toMatch(/agents\(first: 10\)/);
    expect(opening).toContain('subscription Talk');
    expect(opening).toMatch(/sendMessage\(input:/);
    expect(opening).not.toMatch(/in-browser tool|Welcome to/);

    // The headers tab (open already when the page suggests headers), then the key.
    const [headersTab] = await page.$$("xpath/.//button[normalize-space()='Headers']");
    if (!(await headersTab!.evaluate((b) => b.classList.contains('active')))) await headersTab!.click();
    const headersEditor = '.graphiql-editor-tool .graphiql-editor:not(.hidden)';
    await page.waitForSelector(`${headersEditor} .view-lines`);
    expect(await page.$eval(headersEditor, (el) => (el as HTMLElement).innerText)).toContain('X-Api-Key');
    await typeInto(page, headersEditor, `{"X-Api-Key": "${alice.apiKey}"}`);

    await typeInto(page, '.graphiql-query-editor', '{ me { username } }');
    await page.waitForFunction(() => !document.querySelector('.graphiql-tab-active')?.textContent?.includes('Me'), { timeout: 15_000 });
    await page.click('.graphiql-execute-button');
    await page.waitForFunction(() => document.querySelector('.graphiql-response')?.textContent?.includes('alice'), { timeout: 15_000 });
    expect(await responseText(page)).toMatch(/"username":\s*"alice"/);

    const muse = await fixtures(t).agent(alice, { name: 'Muse', key: 'muse' });
    const sessionId = (
      await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [muse.id], title: 'Browser session' } })
    ).body.session_id;
    await typeInto(
      page,
      '.graphiql-query-editor',
      `subscription Watch { sessionEvents(sessionId: "${sessionId}") { __typename ... on AssistantToken { text } } }`,
    );
    // GraphiQL takes in an edit after a pause (the tab's title then names the operation), as a
    // person's click would come after it.
    await page.waitForFunction(() => document.querySelector('.graphiql-tab-active')?.textContent?.includes('Watch'), { timeout: 15_000 });
    await page.click('.graphiql-execute-button');
    await expect.poll(() => t.services.bus.subscriberCount(), { timeout: 15_000 }).toBe(1);

    await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: 'Hello from the browser test' } });
    await page.waitForFunction(() => document.querySelector('.graphiql-response')?.textContent?.includes('AssistantToken'), {
      timeout: 15_000,
    });
    const during = await responseText(page);
    await page.waitForFunction(() => document.querySelector('.graphiql-response')?.textContent?.includes('PromptEnded'), {
      timeout: 30_000,
    });
    expect(during).toMatch(/"text":/);
    const saved = await settledSession(t, alice, sessionId);
    expect(saved.messages.at(-1).content).toMatch(/^I'm Muse, answering offline/);

    const origin = new URL(t.url).origin;
    const elsewhere = requested.filter((u) => !u.startsWith(origin) && !u.startsWith('data:') && !u.startsWith('blob:'));
    expect(elsewhere).toEqual([]);
    expect(requested.some((u) => u.includes('/graphiql/') && u.endsWith('yoga-graphiql.umd.js'))).toBe(true);
    expect(problems).toEqual([]);
    expect(await page.evaluate(() => (window as unknown as { violations?: string[] }).violations ?? [])).toEqual([]);
    await page.close();
  });
});
