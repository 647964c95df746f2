import type { Browser, Page } from 'puppeteer-core';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { launchChromium, recordingPage } from '../helpers/browser.ts';
import type { FakeOpenAI, RecordedRequest } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';
import { until } from '../helpers/until.ts';

/**
 * A tool call that waits for approval, in the playground's session view, in Chromium against
 * the real app and the fake OpenAI server: a card with the tool, its arguments, its price and
 * when it counts as denied, shown live as the reply pauses or from the saved call when the page
 * opens on a paused reply; Approve or Deny (with a reason) settles it and the reply streams on.
 */
let t: TestApp;
let llm: FakeOpenAI;
let svc: Awaited<ReturnType<typeof startFakeToolService>>;
let alice: TestUser;
let browser: Browser;
let careful: { id: string };

const toolAnswer = (r: RecordedRequest) => r.body.messages.find((m) => m.role === 'tool')?.content as string | undefined;

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Hello', '.'] });
  svc = await start.service(startFakeToolService({ answer: { result: { made: 'a picture' } } }));
  const toolsDir = await toolRegistryWith({ remote_maker: httpTool('remote_maker', svc.url) });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, toolsDir });
  alice = await t.createUser('alice');
  await t.services.manna.grant('alice', '100', 'forever');
  careful = await fixtures(t).agent(alice, {
    name: 'Careful',
    key: 'careful',
    tools: { remote_maker: true },
    toolApproval: { tools: { remote_maker: 'always' } },
  });
  llm.choose((r) => {
    if (r.body.messages.at(-1)?.role === 'tool') return { tokens: ['Here', ' it', ' is', '.'] };
    const said = String(r.body.messages.at(-1)?.content ?? '');
    const what = /^draw (.+)$/.exec(said)?.[1];
    if (!what) return undefined;
    return {
      tokens: ['Let me make it.'],
      toolCalls: [{ id: 'call_make', name: 'remote_maker', arguments: JSON.stringify({ prompt: what, n: 2 }) }],
    };
  });
  browser = (await start.service(launchChromium())).browser;
});

async function openSession(sessionId: string) {
  const { page, problems } = await recordingPage(browser, { width: 1280, height: 900 });
  await page.evaluateOnNewDocument((key) => localStorage.setItem('parley.apiKey', key), alice.apiKey);
  await page.goto(`${t.url}/playground/#/session/${encodeURIComponent(sessionId)}`);
  await page.waitForSelector('section.session', { timeout: 30_000 });
  return { page, problems };
}

const lastReply = (page: Page) =>
  page.$eval('article.message[data-role="ASSISTANT"]:last-of-type', (el) => ({
    status: el.getAttribute('data-status'),
    text: (el.querySelector('.content') as HTMLElement).innerText,
  }));

const replyEnded = (page: Page, text: string) =>
  page.waitForFunction(
    (want) => {
      const all = document.querySelectorAll('article.message[data-role="ASSISTANT"]');
      const el = all[all.length - 1];
      return el?.getAttribute('data-status') === 'COMPLETE' && (el.querySelector('.content') as HTMLElement).innerText.includes(want);
    },
    { timeout: 30_000, polling: 50 },
    text,
  );

const noProblemShown = async (page: Page, problems: string[]) => {
  expect(problems).toEqual([]);
  expect(await page.$('[data-problem]')).toBeNull();
};

describe('a tool call that waits for approval, in the playground', () => {
  it('shows a card live as the reply pauses; Approve runs the tool and the reply streams on to its end', async () => {
    const first = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [careful.id], content: 'hi' } });
    const sessionId = first.body.session_id as string;
    const { page, problems } = await openSession(sessionId);
    await replyEnded(page, 'Hello.');

    await page.type('.composer textarea[name="message"]', 'draw two foxes');
    await page.keyboard.press('Enter');
    const card = await page.waitForSelector('.approval-card', { timeout: 30_000 });
    const shown = await card!.evaluate((el) => (el.closest('.tool-call') as HTMLElement).innerText);
    expect(shown).toContain('remote_maker');
    expect(shown).toContain('"prompt": "two foxes"');
    expect(shown).toContain('2 manna');
    expect(shown).toMatch(/Unanswered by .+, it counts as denied\./);
    expect(svc.calls).toHaveLength(0);

    await page.click('.approval-card button[name="approve"]');
    await page.waitForSelector('.tool-call[data-approval="APPROVED"][data-status="COMPLETED"]', { timeout: 30_000 });
    await replyEnded(page, 'Here it is.');
    expect(await page.$('.approval-card')).toBeNull();
    expect((await lastReply(page)).text).toBe('Let me make it.Here it is.');
    expect(svc.calls).toHaveLength(1);
    await noProblemShown(page, problems);
    await page.close();
  });

  it('opened on a paused reply, shows the card from the saved call; Deny with a reason ends the reply saying so', async () => {
    svc.reset();
    const sent = await t.rest('POST', '/v2/sessions', {
      key: alice.apiKey,
      body: { agent_ids: [careful.id], content: 'draw a fox family' },
    });
    const sessionId = sent.body.session_id as string;
    const task = await until('the call to wait', () => t.db.task.findFirst({ where: { sessionId, status: 'awaiting_approval' } }));
    const { page, problems } = await openSession(sessionId);
    await page.waitForSelector(`.approval-card[data-call-id="${task.id}"]`, { timeout: 30_000 });
    expect(await page.$eval('.approval-card', (el) => (el as HTMLElement).innerText)).toContain('2 manna');

    await page.type('.approval-card input[name="reason"]', 'too pricey today');
    await page.click('.approval-card button[name="deny"]');
    await page.waitForSelector('.tool-call[data-approval="DENIED"]', { timeout: 30_000 });
    await replyEnded(page, 'Here it is.');
    const call = await page.$eval('.tool-call', (el) => (el as HTMLElement).innerText);
    expect(call).toContain('denied');
    expect(call).toContain('Denied by the user who pays for it: too pricey today');
    const told = llm.replyRequests().find((r) => toolAnswer(r)?.includes('too pricey'));
    expect(JSON.parse(toolAnswer(told!)!)).toEqual({ error: 'Denied by the user who pays for it: too pricey today' });
    expect(svc.calls).toHaveLength(0);
    await noProblemShown(page, problems);
    await page.close();
  });
});
