import type { Browser, Page } from 'puppeteer-core';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { launchChromium, recordingPage } from '../helpers/browser.ts';
import { type McpToolServer, startMcpToolServer } from '../helpers/mcp-tool-server.ts';
import { setUp } from '../helpers/set-up.ts';
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts';

/**
 * Every panel of the playground, opened as a person opens it (from the page, by its links), in
 * Debian's Chromium against one real server: agents, a session with a streamed reply, autonomy,
 * triggers, tasks (the demo tool and a picture), collections and the Telegram panel. A panel
 * fails its test when it shows an error banner, or is still loading once its bound has passed.
 */
let t: TestApp;
let alice: TestUser;
let browser: Browser;
let receiver: Receiver;
let tools: McpToolServer;
/** The MCP server's authorization header: typed once into the MCP panel, never shown back. */
const MCP_TOKEN = 'Bearer panel-secret-5d2e';

setUp(async (start) => {
  receiver = await start.service(startReceiver());
  tools = await start.service(startMcpToolServer({ authorization: MCP_TOKEN }));
  // The webhook and MCP server the panels add are on loopback: allowed as on a private network.
  t = await start.app({
    llm: { offlineTokenDelayMs: 40 },
    outbound: { allowHttp: true, allowPrivate: true },
    webhooks: { sweepMs: 100 },
    jobs: { pollMs: 500 },
  });
  alice = await t.createUser('alice');
  await t.services.manna.grant('alice', '20', 'forever');
  browser = (await start.service(launchChromium())).browser;
});

/** How long a panel may take to show itself before it counts as stuck loading. */
const BOUND = { timeout: 15_000, polling: 50 } as const;
/** The same bound for an element to show. */
const SHOWN = { timeout: 15_000 } as const;

describe('each panel of the playground, as a person opens it', () => {
  // One visit, panel after panel: each test goes on from where the one before left the page.
  let page: Page;
  let requested: string[];
  let problems: string[];
  const agent = 'Harbour Pilot';

  /** The panel shows `selector` within the bound, says nothing is loading, and no banner is up. */
  async function opened(selector: string) {
    await page.waitForSelector(selector, SHOWN);
    expect(
      await page.$$eval('main .hint', (els) => els.map((el) => (el as HTMLElement).innerText).filter((x) => /Loading/.test(x))),
    ).toEqual([]);
    await noBanner();
  }
  const noBanner = async () =>
    expect(await page.$$eval('[role="alert"]', (els) => els.map((el) => (el as HTMLElement).innerText))).toEqual([]);
  /** Sets a field as a person would: selects what is there and types over it. */
  const typeOver = async (selector: string, value: string) => {
    await page.focus(selector);
    await page.keyboard.down('Control');
    await page.keyboard.press('KeyA');
    await page.keyboard.up('Control');
    await page.keyboard.press('Backspace');
    await page.type(selector, value);
  };
  const headerBalance = () => page.$eval('.whoami .balance', (el) => Number((el as HTMLElement).innerText));

  it('agents: lists yours apart from others, each of yours with its links apart, and makes a new one', async () => {
    ({ page, requested, problems } = await recordingPage(browser, { width: 1280, height: 900 }));
    await page.evaluateOnNewDocument(() => {
      document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP: ${e.violatedDirective} ${e.blockedURI}`));
    });
    page.on('console', (m) => m.type() === 'error' && /CSP/.test(m.text()) && problems.push(m.text()));
    await page.evaluateOnNewDocument((key) => localStorage.setItem('parley.apiKey', key), alice.apiKey);
    await page.goto(`${t.url}/playground/`, { waitUntil: 'load' });
    await opened('.whoami[data-username="alice"]');
    await page.type('.create-agent input[name="agent-name"]', agent);
    await page.type('.create-agent textarea[name="agent-persona"]', 'A calm pilot who knows every buoy of the harbour.');
    await page.click('.create-agent button[type="submit"]');
    const item = await page.waitForSelector(`li[data-agent="${agent}"]`, SHOWN);
    // The words a person reads, each apart: it ran "yourstriggerstelegram" together.
    expect(await item!.evaluate((el) => (el as HTMLElement).innerText.replace(/\s+/g, ' ').trim())).toBe(
      `${agent} yours · triggers · telegram · approvals`,
    );
    await noBanner();
  });

  it('a session: starts with the agent, shows the reply streaming in, and takes a ♥', async () => {
    await page.click(`li[data-agent="${agent}"] input[type="checkbox"]`);
    await page.type('.new-session textarea[name="message"]', 'Which buoy marks the channel?');
    await page.click('.new-session button[type="submit"]');
    await opened('section.session');
    // Seen while it is written, then whole.
    await page.waitForFunction(() => {
      const el = document.querySelector('article.message[data-role="ASSISTANT"]');
      return el?.getAttribute('data-status') === 'STREAMING' && (el.querySelector('.content') as HTMLElement).innerText.length > 3;
    }, BOUND);
    await page.waitForSelector('article.message[data-role="ASSISTANT"][data-status="COMPLETE"]', { timeout: 30_000 });
    await page.click('article.message[data-role="ASSISTANT"] button[data-reaction="❤️"]');
    await page.waitForSelector('article.message[data-role="ASSISTANT"] button[data-reaction="❤️"][aria-pressed="true"]', SHOWN);
    expect(
      await page.$eval('article.message[data-role="ASSISTANT"] button[data-reaction="❤️"]', (el) => (el as HTMLElement).innerText.trim()),
    ).toBe('♥ 1');
    await noBanner();
  });

  it('autonomy: the agent takes the further turn it was given on its own, and the switch says why it stopped', async () => {
    await opened('.autonomy[data-autonomy="off"]');
    const before = await page.$$eval('article.message[data-role="ASSISTANT"]', (els) => els.length);
    await typeOver('.autonomy input[name="more-turns"]', '1');
    await typeOver('.autonomy input[name="reply-interval"]', '0');
    await page.click('.autonomy input[name="auto-reply"]');
    await page.waitForSelector('.autonomy [data-stop-reason="TURN_BUDGET"]', { timeout: 30_000 });
    await page.waitForSelector('.autonomy[data-autonomy="off"]', SHOWN);
    await page.waitForFunction(
      (n) => document.querySelectorAll('article.message[data-role="ASSISTANT"][data-status="COMPLETE"]').length === n + 1,
      BOUND,
      before,
    );
    await noBanner();
  });

  it('triggers: the panel opens from the agent, pages its triggers, makes one, runs it now, pauses and resumes it', async () => {
    // More than a page of them already (the panel used to ask for 50 with 5 runs each: refused for its cost).
    const rawAgentId = (await t.db.agent.findFirstOrThrow({ where: { name: agent } })).id;
    for (let i = 0; i < 21; i++)
      await t.services.triggers.create({ id: alice.id }, rawAgentId, { name: `Tide ${i}`, prompt: 'Tell the tide', schedule: null });
    await page.click(`li[data-agent="${agent}"] a.triggers-link`);
    await opened('.triggers h2');
    expect(await page.$eval('.triggers h2', (el) => (el as HTMLElement).innerText)).toBe(`Triggers of ${agent}`);
    expect(await page.$$eval('.trigger-list > li', (els) => els.length)).toBe(20);
    await page.click('.triggers button[name="more-triggers"]');
    await page.waitForFunction(() => document.querySelectorAll('.trigger-list > li').length === 21, BOUND);

    await page.type('.new-trigger input[name="trigger-name"]', 'Morning check');
    await page.type('.new-trigger textarea[name="trigger-prompt"]', 'Say which buoys are lit');
    await page.click('.new-trigger input[name="trigger-by-hand"]');
    await page.click('.new-trigger button[type="submit"]');
    const card = '.trigger[data-trigger="Morning check"]';
    await page.waitForSelector(card, SHOWN);
    await page.click(`${card} button[name="run-now"]`);
    await page.waitForSelector(`${card} .run[data-run-status="COMPLETED"] a`, { timeout: 30_000 });
    await page.click(`${card} button[name="pause"]`);
    await page.waitForSelector(`${card}[data-status="PAUSED"]`, SHOWN);
    await page.click(`${card} button[name="resume"]`);
    await page.waitForSelector(`${card}[data-status="ACTIVE"]`, SHOWN);
    await noBanner();
  });

  it('tasks: the demo tool reports its progress and is cancelled, another run completes; a picture shows as one; the header balance follows', async () => {
    await page.click('aside a[href="#/tasks"]');
    await opened('.tasks-view .task-balance[data-balance="20"]');
    const balances = async (n: number) => {
      await page.waitForSelector(`.tasks-view .task-balance[data-balance="${n}"]`, SHOWN);
      await page.waitForFunction((b) => document.querySelector('.whoami .balance')?.textContent === String(b), BOUND, n);
    };
    await page.waitForFunction(
      () =>
        [...(document.querySelector('.new-task select[name="tool"]') as HTMLSelectElement).options].some((o) => o.value === 'countdown'),
      BOUND,
    );
    await page.select('.new-task select[name="tool"]', 'countdown');
    await typeOver('.new-task [name="arg-seconds"]', '100');
    await typeOver('.new-task [name="arg-steps"]', '100');
    await page.waitForSelector('.new-task .estimate[data-estimate="10"]', SHOWN);
    await page.click('.new-task button[type="submit"]');
    // Progress a person can watch: the bar moves and the tool says how far it is.
    const running = await page.waitForFunction(
      () => {
        const el = document.querySelector('.task[data-tool="countdown"][data-status="RUNNING"]');
        const going = el && Number(el.getAttribute('data-progress')) > 0 && /\d+ of 100 steps/.test((el as HTMLElement).innerText);
        return going ? el.getAttribute('data-task-id') : null;
      },
      { timeout: 30_000, polling: 50 },
    );
    const cancelledId = (await running.jsonValue()) as string;
    await balances(10);
    await page.click(`.task[data-task-id="${cancelledId}"] button[name="cancel-task"]`);
    await page.waitForSelector(`.task[data-task-id="${cancelledId}"][data-status="CANCELLED"]`, SHOWN);
    await balances(20);

    await typeOver('.new-task [name="arg-seconds"]', '1');
    await typeOver('.new-task [name="arg-steps"]', '2');
    await page.waitForSelector('.new-task .estimate[data-estimate="0.1"]', SHOWN);
    await page.click('.new-task button[type="submit"]');
    const done = await page.waitForSelector('.task[data-tool="countdown"][data-status="COMPLETED"] .result', { timeout: 30_000 });
    expect(JSON.parse(await done!.evaluate((el) => (el as HTMLElement).innerText))).toEqual({
      counted: 2,
      seconds: 1,
      message: 'Counted 2 steps in 1 s',
    });
    await balances(19.9);

    await page.select('.new-task select[name="tool"]', 'flux_schnell');
    await page.type('.new-task [name="arg-prompt"]', 'a kite over the harbour');
    await typeOver('.new-task [name="arg-n_samples"]', '1');
    await page.waitForSelector('.new-task .estimate[data-estimate="0.25"]', SHOWN);
    await page.click('.new-task button[type="submit"]');
    // The picture, drawn (not its JSON), linking to itself at full size.
    const picture = await page.waitForFunction(
      () => {
        const img = document.querySelector(
          '.task[data-tool="flux_schnell"][data-status="COMPLETED"] .pictures img',
        ) as HTMLImageElement | null;
        return img?.complete && img.naturalWidth > 0 ? { src: img.src, href: (img.closest('a') as HTMLAnchorElement).href } : null;
      },
      { timeout: 30_000, polling: 50 },
    );
    const { src, href } = (await picture.jsonValue()) as { src: string; href: string };
    const made = await t.db.creation.findFirstOrThrow({ where: { userId: alice.id, tool: 'flux_schnell' } });
    expect(href).toBe(new URL(made.url, t.url).href);
    expect(src).toBe(new URL(made.thumbnail ?? made.url, t.url).href);
    expect(await page.$('.task[data-tool="flux_schnell"] details.raw-result[open]')).toBeNull();
    await balances(19.65);
    await noBanner();
  });

  it('collections: keeps the picture in a new collection, shows it as a thumbnail, and makes the collection private', async () => {
    await page.click('aside a[href="#/collections"]');
    await opened('.collections-view .collection-search');
    await page.type('.collection-search input[name="search"]', 'a kite over the harbour');
    await page.click('.collection-search button[type="submit"]');
    await page.waitForSelector('.search-results li[data-creation] input[type="checkbox"]', SHOWN);
    await page.click('.search-results li[data-creation] input[type="checkbox"]');
    await page.type('.collection-save input[name="collection-name"]', 'Kites');
    await page.click('.collection-save button[type="submit"]');
    const kites = '.collections li[data-collection="Kites"]';
    await page.waitForFunction(
      (sel) => {
        const img = document.querySelector(`${sel} .pictures img`) as HTMLImageElement | null;
        return img?.complete && img.naturalWidth > 0;
      },
      BOUND,
      kites,
    );
    expect(await page.$eval(`${kites}`, (el) => el.getAttribute('data-public'))).toBe('true');
    await page.click(`${kites} input[name="collection-public"]`);
    await page.waitForSelector(`${kites}[data-public="false"]`, SHOWN);
    const light = await t.rest('GET', '/v2/collections/light', { key: alice.apiKey });
    expect(light.body.collections).toEqual([expect.objectContaining({ name: 'Kites', public: false })]);
    await noBanner();
  });

  it('telegram: the deploy panel opens from the agent, ready for a token', async () => {
    await page.click(`li[data-agent="${agent}"] a.deploy-link`);
    await opened('.deployments h2');
    expect(await page.$eval('.deployments h2', (el) => (el as HTMLElement).innerText)).toBe(`Deploy ${agent} to Telegram`);
    expect(await page.$('.deploy-form input[name="telegram-token"]')).not.toBeNull();
  });

  it('webhooks: makes an endpoint, shows its secret once, sends a test that the receiver verifies, and logs it delivered', async () => {
    await page.click('a[href="#/webhooks"]');
    await opened('.webhooks h2');
    await page.type('.create-webhook input[name="webhook-url"]', receiver.url);
    await page.click('.create-webhook input[name="TASK_FAILED"]');
    await page.click('.create-webhook button[type="submit"]');
    const item = `li[data-webhook="${receiver.url}"]`;
    await page.waitForSelector(item, SHOWN);
    const secret = await page.$eval('.webhook-secret code', (el) => (el as HTMLElement).innerText);
    expect(secret).toMatch(/^whsec_/);
    await page.click(`${item} button.test`);
    await expect.poll(() => receiver.received.length, BOUND).toBe(1);
    expect(receiver.verify(receiver.received[0]!, secret).type).toBe('webhook.test');
    // The log shows what was stored when it was read: read again until the try's outcome is in.
    await expect
      .poll(async () => {
        await page.click(`${item} button.refresh`);
        return (await page.$(`${item} li[data-status="delivered"]`)) !== null;
      }, BOUND)
      .toBe(true);
    await noBanner();
  });

  it('loaded everything from the service itself, with nothing blocked or thrown', async () => {
    const origin = new URL(t.url).origin;
    for (const url of requested) expect(new URL(url).origin).toBe(origin);
    expect(problems).toEqual([]);
    expect(await headerBalance()).toBe(19.65);
    await page.close();
  });
});

describe('the MCP servers panel, as a person uses it', () => {
  it('registers a server with its authorization once, shows its tools and schemas, says why another cannot be reached, and enables a tool on an agent that a reload shows ticked', async () => {
    const made = await t.rest('POST', '/v2/agents', { key: alice.apiKey, body: { name: 'Lamplighter', key: 'lamplighter-mcp' } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const { page, problems } = await recordingPage(browser, { width: 1280, height: 900 });
    const noBanner = async () =>
      expect(await page.$$eval('[role="alert"]', (els) => els.map((el) => (el as HTMLElement).innerText))).toEqual([]);
    await page.evaluateOnNewDocument((key) => localStorage.setItem('parley.apiKey', key), alice.apiKey);
    await page.goto(`${t.url}/playground/`, { waitUntil: 'load' });
    await page.waitForSelector('.whoami[data-username="alice"]', SHOWN);
    await page.click('aside a[href="#/mcp"]');
    await page.waitForSelector('.mcp h2', SHOWN);

    await page.type('.add-mcp-server input[name="mcp-name"]', 'loop');
    await page.type('.add-mcp-server input[name="mcp-url"]', tools.url);
    await page.type('.add-mcp-server input[name="mcp-authorization"]', MCP_TOKEN);
    await page.type('.add-mcp-server textarea[name="mcp-headers"]', 'X-Team: blue');
    await page.focus('.add-mcp-server input[name="mcp-price"]');
    await page.keyboard.down('Control');
    await page.keyboard.press('KeyA');
    await page.keyboard.up('Control');
    await page.keyboard.press('Backspace');
    await page.type('.add-mcp-server input[name="mcp-price"]', '3');
    expect(await page.$eval('.add-mcp-server input[name="mcp-authorization"]', (el) => (el as HTMLInputElement).type)).toBe('password');
    await page.click('.add-mcp-server button[type="submit"]');
    const loop = '.mcp-server[data-mcp-server="loop"]';
    await page.waitForSelector(`${loop} .mcp-tools li[data-tool="echo"]`, SHOWN);
    const card = await page.$eval(loop, (el) => (el as HTMLElement).innerText.replace(/\s+/g, ' '));
    expect(card).toContain(tools.url);
    expect(card).toContain('3 manna a call');
    expect(card).toContain('authorization kept (sealed)');
    expect(card).toContain('x-team: blue');
    // The server was asked with the header; the page shows it nowhere and keeps it in no field.
    expect(tools.requests.some((h) => h.authorization === MCP_TOKEN)).toBe(true);
    expect(await page.content()).not.toContain('panel-secret-5d2e');
    expect(await page.$eval('.add-mcp-server input[name="mcp-authorization"]', (el) => (el as HTMLInputElement).value)).toBe('');
    // Each tool with its description and its input schema, folded until opened.
    const echo = `${loop} li[data-tool="echo"]`;
    expect(await page.$eval(`${echo} .description`, (el) => (el as HTMLElement).innerText)).toBe('Says the text back');
    expect(await page.$eval(`${echo} details.input-schema`, (el) => (el as HTMLDetailsElement).open)).toBe(false);
    await page.click(`${echo} details.input-schema summary`);
    const schema = JSON.parse(await page.$eval(`${echo} details.input-schema pre`, (el) => (el as HTMLElement).innerText));
    expect(schema).toMatchObject({ type: 'object', properties: { text: { type: 'string', maxLength: 200 } }, required: ['text'] });
    expect(await page.$$eval(`${loop} .mcp-tools li[data-tool]`, (els) => els.map((el) => el.getAttribute('data-tool')))).toEqual(
      expect.arrayContaining(['echo', 'slow', 'paced', 'fail', 'snapshot', 'hang']),
    );
    await noBanner();

    // Nothing listens on port 1 of loopback: the server's own card says why, and no banner goes up.
    await page.type('.add-mcp-server input[name="mcp-name"]', 'dead');
    await page.type('.add-mcp-server input[name="mcp-url"]', 'http://127.0.0.1:1/mcp');
    await page.click('.add-mcp-server button[type="submit"]');
    const reason = await page.waitForSelector('.mcp-server[data-mcp-server="dead"] .unreachable', SHOWN);
    expect(await reason!.evaluate((el) => (el as HTMLElement).innerText)).toBe(
      'The MCP server dead could not be used: the connection was refused',
    );
    await noBanner();

    const agentOption = async () =>
      page.$$eval('.agent-mcp-tools select[name="mcp-agent"] option', (els) =>
        els.find((el) => (el as HTMLOptionElement).text === 'Lamplighter')?.getAttribute('value'),
      );
    const pick = async () => {
      await page.waitForSelector('.agent-mcp-tools select[name="mcp-agent"]', SHOWN);
      const value = await agentOption();
      expect(value).toBeTruthy();
      await page.select('.agent-mcp-tools select[name="mcp-agent"]', value!);
      await page.waitForSelector(`.agent-mcp-tools[data-agent-id="${value}"][data-loaded="true"] fieldset[data-mcp-server="loop"]`, SHOWN);
    };
    await pick();
    const tick = '.agent-mcp-tools fieldset[data-mcp-server="loop"] input[name="mcp-tool-echo"]';
    await page.waitForSelector(tick, SHOWN);
    await page.click(tick);
    await page.click('.agent-mcp-tools button[name="save-mcp-tools"]');
    await page.waitForSelector('.agent-mcp-tools .saved', SHOWN);
    await noBanner();

    await page.reload({ waitUntil: 'load' });
    await page.waitForSelector('.mcp h2', SHOWN);
    await pick();
    await page.waitForSelector(tick, SHOWN);
    const checked = await page.$$eval('.agent-mcp-tools fieldset[data-mcp-server="loop"] input[type="checkbox"]', (els) =>
      els.filter((el) => (el as HTMLInputElement).checked).map((el) => el.getAttribute('name')),
    );
    expect(checked).toEqual(['mcp-tool-echo']);
    const server = (await t.rest('GET', '/v2/mcp/servers', { key: alice.apiKey })).body.servers.find(
      (s: { name: string }) => s.name === 'loop',
    );
    const shown = await t.rest('GET', `/v2/agents/${made.body.agentId}`, { key: alice.apiKey });
    expect(shown.body.agent.mcp_tools).toEqual([{ server_id: server.id, tool: 'echo', function_name: 'loop__echo' }]);
    await noBanner();
    expect(problems).toEqual([]);
    await page.close();
  });
});
