import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { trueClockEnv } from './servers.ts';

export interface TestBrowser {
  browser: Browser;
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

/**
 * Debian's Chromium (`apt-get install chromium`), headless, with a profile of its own and the
 * flags that keep it from reaching for the network this machine does not have.
 */
export async function launchChromium(): Promise<TestBrowser> {
  const profile = await mkdtemp(join(tmpdir(), 'parley-chromium-'));
  try {
    const browser = await puppeteer.launch({
      executablePath: '/usr/bin/chromium',
      headless: true,
      userDataDir: profile,
      env: trueClockEnv(),
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    return {
      browser,
      async close() {
        await browser.close();
        await rm(profile, { recursive: true, force: true });
      },
    };
  } catch (e) {
    await rm(profile, { recursive: true, force: true });
    throw e;
  }
}

/** A new page of this size that records every request it makes and every error its scripts throw. */
export async function recordingPage(
  browser: Browser,
  viewport: { width: number; height: number },
): Promise<{ page: Page; requested: string[]; problems: string[] }> {
  const page = await browser.newPage();
  await page.setViewport(viewport);
  const requested: string[] = [];
  const problems: string[] = [];
  page.on('request', (r) => requested.push(r.url()));
  page.on('pageerror', (e) => problems.push(String(e)));
  return { page, requested, problems };
}
