// The first minute after `npm install`, scripted as a person would do it and timed step by step:
// `npm start` until it listens, `npx parley keys create` in a "second terminal" while the service
// runs, the browser (Debian's Chromium) opening the playground, and a message until its reply's
// first token is on screen and until the reply is complete. On a fresh data directory and a free
// port; everything it starts is stopped at the end. Times are absolute (one run on a shared
// machine): read them as the order of magnitude of each step, not as a comparison.
//   npm run bench:first-minute
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';
import { freePort } from '../test/helpers/servers.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const dataDir = await mkdtemp(join(tmpdir(), 'parley-first-minute-'));
const port = await freePort();
const env = { ...process.env, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
const since = (start: number) => `${((performance.now() - start) / 1000).toFixed(1)} s`;
const steps: [string, string][] = [];

const started = performance.now();
// Its own process group, so that npm, its shell and the service stop together.
const server = spawn('npm', ['start', '--silent'], { cwd: root, env, detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
const browser = await puppeteer.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-background-networking'],
});
try {
  await new Promise<void>((resolve, reject) => {
    server.stdout!.on('data', (d: Buffer) => String(d).includes('parley listening') && resolve());
    server.on('exit', () => reject(new Error('npm start exited before listening')));
  });
  steps.push(['npm start until it listens', since(started)]);

  let at = performance.now();
  const out = execFileSync('npx', ['parley', 'keys', 'create', 'alice', '--json'], { cwd: root, env, encoding: 'utf8' });
  const { apiKey } = JSON.parse(out.trim().split('\n').at(-1)!) as { apiKey: string };
  steps.push(['npx parley keys create, service running', since(at)]);

  at = performance.now();
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${port}/`, { waitUntil: 'load' });
  await page.waitForSelector('input[name="key"]');
  steps.push(['browser: playground shown', since(at)]);

  at = performance.now();
  await page.type('input[name="key"]', apiKey);
  await page.click('.key-form button[type="submit"]');
  await page.waitForSelector('.whoami');
  await page.type('input[name="agent-name"]', 'Guide');
  await page.click('.create-agent button[type="submit"]');
  await page.waitForSelector('li[data-agent="Guide"] input');
  await page.click('li[data-agent="Guide"] input');
  await page.type('.new-session textarea', 'Hello!');
  steps.push(['browser: key, agent, message typed (scripted)', since(at)]);

  at = performance.now();
  await page.click('.new-session button[type="submit"]');
  const reply = 'article[data-role="ASSISTANT"]';
  await page.waitForFunction((s) => (document.querySelector(`${s} .content`)?.textContent ?? '').length > 0, { polling: 20 }, reply);
  steps.push(['send until the first token is on screen', since(at)]);
  await page.waitForFunction((s) => document.querySelector(s)?.getAttribute('data-status') === 'COMPLETE', { polling: 20 }, reply);
  steps.push(['send until the reply is complete', since(at)]);
  steps.push(['all of the above', since(started)]);
} finally {
  await browser.close();
  try {
    process.kill(-server.pid!, 'SIGTERM');
  } catch {
    // already gone
  }
  await new Promise((resolve) => server.on('close', resolve));
  await rm(dataDir, { recursive: true, force: true });
}
for (const [step, time] of steps) console.log(`${step.padEnd(48)} ${time}`);
