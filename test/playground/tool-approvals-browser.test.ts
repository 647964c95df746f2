import type { Browser, Page } from 'puppeteer-core';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { launchChromium, recordingPage } from '../helpers/browser.ts';
import type { FakeOpenAI, RecordedRequest } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { type McpToolServer, startMcpToolServer } from '../helpers/mcp-tool-server.ts';
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
let mcp: McpToolServer;
let alice: TestUser;
let browser: Browser;
let careful: { id: string };
let thrifty: { id: string };

const toolAnswer = (r: RecordedRequest) => r.body.messages.find((m) => m.role === 'tool')?.content as string | undefined;

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Hello', '.'] });
  svc = await start.service(startFakeToolService({ answer: { result: { made: 'a picture' } } }));
  const toolsDir = await toolRegistryWith({ remote_maker: httpTool('remote_maker', svc.url) });
  mcp = await start.service(startMcpToolServer());
  // The MCP server is on loopback, over http: what an operator allows for tests and private networks.
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, toolsDir, outbound: { allowHttp: true, allowPrivate: true } });
  alice = await t.createUser('alice');
  await t.services.manna.grant('alice', '100', 'forever');
  careful = await fixtures(t).agent(alice, {
    name: 'Careful',
    key: 'careful',
    tools: { remote_maker: true },
    toolApproval: { tools: { remote_maker: 'always' } },
  });
  thrifty = await fixtures(t).agent(alice, { name: 'Thrifty', key: 'thrifty', tools: { remote_maker: true } });
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

  it('approved elsewhere (another tab, a chat, REST): the card goes at once, before the tool has run', async () => {
    svc.reset();
    let release!: () => void;
    svc.enqueue({ answer: { result: { made: 'a picture' } }, gate: new Promise<void>((resolve) => (release = resolve)) });
    const sent = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [careful.id], content: 'draw a heron' } });
    const sessionId = sent.body.session_id as string;
    const task = await until('the call to wait', () => t.db.task.findFirst({ where: { sessionId, status: 'awaiting_approval' } }));
    const { page, problems } = await openSession(sessionId);
    await page.waitForSelector(`.approval-card[data-call-id="${task.id}"]`, { timeout: 30_000 });

    const approved = await t.rest('POST', `/v2/sessions/${sessionId}/approvals/${task.id}`, { key: alice.apiKey, body: { approve: true } });
    expect(approved.status).toBe(200);
    await page.waitForSelector('.tool-call[data-approval="APPROVED"]', { timeout: 30_000 });
    expect(await page.$('.approval-card')).toBeNull();
    // The tool is still held: what took the card away was the answer, not the call's end.
    await until('the tool to be called', () => svc.calls.length === 1 || null);
    expect(await page.$eval('.tool-call', (el) => el.getAttribute('data-status'))).not.toBe('COMPLETED');
    release();
    await replyEnded(page, 'Here it is.');
    await noProblemShown(page, problems);
    await page.close();
  });
});

/** The agent's approval setting as REST reads it back: what the panel saved, not what it shows. */
const approvalOf = async (agentId: string) => {
  const res = await t.rest('GET', `/v2/agents/${encodeURIComponent(agentId)}`, { key: alice.apiKey });
  expect(res.status).toBe(200);
  return res.body.agent.tool_approval;
};

async function openApprovals() {
  const { page, problems } = await recordingPage(browser, { width: 1280, height: 900 });
  await page.evaluateOnNewDocument((key) => localStorage.setItem('parley.apiKey', key), alice.apiKey);
  await page.goto(`${t.url}/playground/#/`);
  await page.waitForSelector('li[data-agent="Thrifty"] a.approvals-link', { timeout: 30_000 });
  await page.click('li[data-agent="Thrifty"] a.approvals-link');
  await page.waitForSelector('form.approvals .approval-rule[data-tool="remote_maker"]', { timeout: 30_000 });
  return { page, problems };
}

const retype = async (page: Page, selector: string, text: string) => {
  await page.click(selector);
  await page.keyboard.down('Control');
  await page.keyboard.press('a');
  await page.keyboard.up('Control');
  await page.type(selector, text);
};

const shownSetting = (page: Page) =>
  page.$eval('form.approvals', (form) => ({
    mode: (form.querySelector('select[name="mode-remote_maker"]') as HTMLSelectElement).value,
    above: (form.querySelector('input[name="above-remote_maker"]') as HTMLInputElement | null)?.value ?? null,
    wait: (form.querySelector('input[name="wait"]') as HTMLInputElement).value,
    unit: (form.querySelector('select[name="wait-unit"]') as HTMLSelectElement).value,
  }));

describe("an agent's approval settings, in the playground", () => {
  it('sets a tool to ask above 1 manna with a 2-minute wait: saved, shown after a reload, and a dearer call waits for approval', async () => {
    svc.reset();
    expect(await approvalOf(thrifty.id)).toEqual({ tools: {}, timeout_seconds: 600 });
    const { page, problems } = await openApprovals();
    expect(await shownSetting(page)).toEqual({ mode: 'never', above: null, wait: '10', unit: 'minutes' });

    await page.select('select[name="mode-remote_maker"]', 'above');
    await page.type('input[name="above-remote_maker"]', '1');
    await retype(page, 'input[name="wait"]', '2');
    await page.select('select[name="wait-unit"]', 'minutes');
    await page.click('form.approvals button[name="save"]');
    await page.waitForSelector('form.approvals .saved', { timeout: 30_000 });
    expect(await approvalOf(thrifty.id)).toEqual({ tools: { remote_maker: { above: 1 } }, timeout_seconds: 120 });

    await page.reload();
    await page.waitForSelector('form.approvals .approval-rule[data-mode="above"]', { timeout: 30_000 });
    expect(await shownSetting(page)).toEqual({ mode: 'above', above: '1', wait: '2', unit: 'minutes' });
    await noProblemShown(page, problems);
    await page.close();

    const sent = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [thrifty.id], content: 'draw two owls' } });
    const sessionId = sent.body.session_id as string;
    const task = await until('the call to wait', () => t.db.task.findFirst({ where: { sessionId, status: 'awaiting_approval' } }));
    const session = await openSession(sessionId);
    await session.page.waitForSelector(`.approval-card[data-call-id="${task.id}"]`, { timeout: 30_000 });
    const card = await session.page.$eval('.approval-card', (el) => el.closest('.tool-call')?.textContent ?? '');
    expect(card).toContain('remote_maker');
    expect(card).toContain('2 manna');
    expect(svc.calls).toHaveLength(0);
    await noProblemShown(session.page, session.problems);
    await session.page.close();
  });

  it('lists the MCP tools enabled on the agent by the name the model calls them; "always asks" is saved under it', async () => {
    const server = await t.rest('POST', '/v2/mcp/servers', { key: alice.apiKey, body: { name: 'loop', url: mcp.url } });
    expect(server.status, JSON.stringify(server.body)).toBe(201);
    const enabled = await t.rest('PATCH', `/v2/agents/${thrifty.id}`, {
      key: alice.apiKey,
      body: { mcp_tools: [{ server_id: server.body.server.id, tool: 'echo' }] },
    });
    expect(enabled.status).toBe(200);
    const before = await approvalOf(thrifty.id);
    const { page, problems } = await openApprovals();
    const row = await page.waitForSelector('form.approvals .approval-rule[data-tool="loop__echo"]', { timeout: 30_000 });
    expect(await row!.evaluate((el) => el.textContent ?? '')).toContain('echo (MCP server loop)');
    await page.select('select[name="mode-loop__echo"]', 'always');
    await page.click('form.approvals button[name="save"]');
    await page.waitForSelector('form.approvals .saved', { timeout: 30_000 });
    expect(await approvalOf(thrifty.id)).toEqual({ ...before, tools: { ...before.tools, loop__echo: 'always' } });
    await noProblemShown(page, problems);
    await page.close();
  });

  it('refuses a negative price in words and changes nothing', async () => {
    const before = await approvalOf(thrifty.id);
    const { page, problems } = await openApprovals();
    const shown = await shownSetting(page);
    if (shown.mode !== 'above') await page.select('select[name="mode-remote_maker"]', 'above');
    await retype(page, 'input[name="above-remote_maker"]', '-3');
    await page.click('form.approvals button[name="save"]');
    const problem = await page.waitForSelector('[data-problem]', { timeout: 30_000 });
    const said = await problem!.evaluate((el) => el.textContent ?? '');
    expect(said).toContain('cannot ask above -3 manna: the amount must be at least 0.');
    expect(await page.$('form.approvals .saved')).toBeNull();
    expect(await approvalOf(thrifty.id)).toEqual(before);
    expect(problems).toEqual([]);
    await page.close();
  });
});
