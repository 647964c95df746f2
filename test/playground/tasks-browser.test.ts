import type { Browser, Page } from 'puppeteer-core';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { launchChromium, recordingPage } from '../helpers/browser.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { setUp } from '../helpers/set-up.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';

/**
 * The playground's Tasks view as a person uses it, in Debian's Chromium against a real server:
 * pick a tool, give its arguments, see the cost, create the task, watch its progress and result
 * arrive live (taskUpdates over graphql-ws), cancel another while it runs, and find the same on
 * the server (REST) and in the balance. The tool is a fake tool service on loopback whose answers
 * the test releases, so "running" lasts as long as the test needs; it waits on what the page
 * shows, never on time.
 */
let t: TestApp;
let svc: Awaited<ReturnType<typeof startFakeToolService>>;
let alice: TestUser;
let browser: Browser;

setUp(async (start) => {
  svc = await start.service(startFakeToolService());
  // Costs 3 per picture; no retries and a long timeout, so a call held open stays one running task until cancelled.
  const toolsDir = await toolRegistryWith({ sketch: httpTool('sketch', svc.url, '3 * n', { timeoutMs: 120_000, retries: 0 }) });
  t = await start.app({ toolsDir });
  alice = await t.createUser('alice');
  await t.services.manna.grant('alice', '20', 'forever');
  browser = (await start.service(launchChromium())).browser;
});

const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

describe('running tools as tasks in the playground', () => {
  // One visit, step by step: each test goes on from where the one before left the page.
  let page: Page;
  let requested: string[];
  let problems: string[];
  const shown: Record<string, { status: string; cost: string; result?: unknown; error?: string }> = {};
  let completedId: string;
  let cancelledId: string;

  const balanceShown = (n: number) => page.waitForSelector(`.tasks-view .task-balance[data-balance="${n}"]`);
  /** Sets an argument's field as a person would: clears it and types. */
  const setArg = async (name: string, value: string) => {
    await page.focus(`.new-task [name="arg-${name}"]`);
    await page.keyboard.down('Control');
    await page.keyboard.press('KeyA');
    await page.keyboard.up('Control');
    await page.keyboard.press('Backspace');
    await page.type(`.new-task [name="arg-${name}"]`, value);
  };

  it('creates a task after seeing its cost, and watches its progress and then its result arrive live', async () => {
    const finish = deferred();
    svc.enqueue({
      lines: [{ progress: 0.5, message: 'halfway there' }, { result: { picture: 'a kite over the dunes', seconds: 2 } }],
      before: (i) => (i === 0 ? Promise.resolve() : finish.promise),
    });
    ({ page, requested, problems } = await recordingPage(browser, { width: 1280, height: 900 }));
    await page.evaluateOnNewDocument(() => {
      document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP: ${e.violatedDirective} ${e.blockedURI}`));
    });
    page.on('console', (m) => m.type() === 'error' && /CSP/.test(m.text()) && problems.push(m.text()));
    await page.evaluateOnNewDocument((key) => localStorage.setItem('parley.apiKey', key), alice.apiKey);

    const listening = t.services.bus.subscriberCount();
    await page.goto(`${t.url}/playground/#/tasks`, { waitUntil: 'load' });
    await balanceShown(20);
    // The view follows taskUpdates before anything is made, as a person's page would be by then.
    await expect.poll(() => t.services.bus.subscriberCount()).toBe(listening + 1);

    // Read as the select sees its options: an option whose text is its value may carry no value attribute.
    await page.waitForFunction(
      () => [...(document.querySelector('.new-task select[name="tool"]') as HTMLSelectElement).options].some((o) => o.value === 'sketch'),
      { polling: 50 },
    );
    await page.select('.new-task select[name="tool"]', 'sketch');
    await page.type('.new-task [name="arg-prompt"]', 'a kite over the dunes');
    await setArg('n', '2');
    await page.waitForSelector('.new-task .estimate[data-estimate="6"]');
    await page.click('.new-task button[type="submit"]');

    // Live: the page shows the tool's progress and what it says while the task runs, the cost held.
    const running = await page.waitForSelector('.task[data-tool="sketch"][data-status="RUNNING"][data-progress="0.5"]');
    completedId = await running!.evaluate((el) => el.getAttribute('data-task-id')!);
    expect(await running!.evaluate((el) => (el as HTMLElement).innerText)).toMatch(/50%[\s\S]*halfway there/);
    await balanceShown(14);

    finish.resolve();
    const done = await page.waitForSelector(`.task[data-task-id="${completedId}"][data-status="COMPLETED"]`);
    shown[completedId] = await done!.evaluate((el) => ({
      status: el.getAttribute('data-status')!,
      cost: (el.querySelector('.cost') as HTMLElement).innerText,
      result: JSON.parse((el.querySelector('.result') as HTMLElement).innerText),
    }));
    expect(shown[completedId]).toEqual({
      status: 'COMPLETED',
      cost: 'charged 6 manna',
      result: { picture: 'a kite over the dunes', seconds: 2 },
    });
    await balanceShown(14);
  });

  it('cancels another task while it runs: the page shows it cancelled and its hold returned', async () => {
    svc.enqueue({ hang: true });
    await setArg('n', '1');
    await page.waitForSelector('.new-task .estimate[data-estimate="3"]');
    await page.click('.new-task button[type="submit"]');
    const running = await page.waitForSelector(`.task[data-status="RUNNING"]:not([data-task-id="${completedId}"])`);
    cancelledId = await running!.evaluate((el) => el.getAttribute('data-task-id')!);
    await balanceShown(11);
    // It is running at the tool service when cancelled.
    await expect.poll(() => svc.calls.length).toBe(2);

    await page.click(`.task[data-task-id="${cancelledId}"] button[name="cancel-task"]`);
    // Read in one go once the card shows the end whole (its status, what the hold became, why),
    // which arrive from the cancel's answer and the task's event in either order.
    const cancelled = await page.waitForFunction(
      (id) => {
        const el = document.querySelector(`.task[data-task-id="${id}"][data-status="CANCELLED"]`);
        const cost = (el?.querySelector('.cost') as HTMLElement | null)?.innerText;
        const error = (el?.querySelector('.task-error') as HTMLElement | null)?.innerText;
        return el && cost && error ? { status: el.getAttribute('data-status')!, cost, error } : null;
      },
      { polling: 50 },
      cancelledId,
    );
    shown[cancelledId] = (await cancelled.jsonValue()) as { status: string; cost: string; error: string };
    expect(shown[cancelledId]).toEqual({ status: 'CANCELLED', cost: '3 manna returned', error: 'Cancelled by its owner' });
    await balanceShown(14);
    // The tool service was let go.
    await svc.calls[1]!.abandoned;
  });

  it('lists both again after a reload, and the server holds what the page showed, the balance moved as it said', async () => {
    await page.reload({ waitUntil: 'load' });
    await page.waitForSelector(`.task[data-task-id="${completedId}"][data-status="COMPLETED"]`);
    await page.waitForSelector(`.task[data-task-id="${cancelledId}"][data-status="CANCELLED"]`);
    const listed = await page.$$eval('.task-list .task', (els) =>
      els.map((el) => [el.getAttribute('data-task-id'), el.getAttribute('data-status')]),
    );
    expect(listed).toEqual([
      [cancelledId, 'CANCELLED'],
      [completedId, 'COMPLETED'],
    ]);
    await balanceShown(14);
    // No request of the view was refused (the page shows a problem banner for any).
    expect(await page.$('[data-problem]')).toBeNull();

    const { status, body } = await t.rest('GET', '/v2/tasks', { key: alice.apiKey });
    expect(status).toBe(200);
    const byId = Object.fromEntries(body.docs.map((d: any) => [d._id, d]));
    expect(Object.keys(byId).sort()).toEqual([completedId, cancelledId].sort());
    expect(byId[completedId]).toMatchObject({
      tool: 'sketch',
      status: 'completed',
      cost: 6,
      progress: 1,
      args: { prompt: 'a kite over the dunes', n: 2 },
    });
    expect(byId[completedId].result).toEqual([expect.objectContaining({ data: shown[completedId]!.result })]);
    expect(byId[cancelledId]).toMatchObject({
      tool: 'sketch',
      status: 'cancelled',
      cost: 3,
      error: shown[cancelledId]!.error,
      args: { n: 1 },
    });

    // 20 granted: the completed one's 6 charged, the cancelled one's 3 returned.
    const me = await t.rest('GET', '/v2/creators/me', { key: alice.apiKey });
    expect(me.body.balance).toBe(20 - 6);

    const origin = new URL(t.url).origin;
    for (const url of requested) expect(new URL(url).origin).toBe(origin);
    expect(problems).toEqual([]);
    await page.close();
  });
});
