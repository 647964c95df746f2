import { afterAll, beforeAll } from 'vitest';
import type { DatabaseConfig } from '../../src/config.ts';
import { type ConfigOverrides, startTestApp, type TestApp } from './app.ts';
import { type FakeOpenAI, type Script, startFakeOpenAI } from './fake-openai.ts';

/** Something a test starts and must stop: a server, a browser, a client. */
type Closable = { close(): unknown } | { stop(): unknown };

/** What a `setUp` may start; each is closed after the tests, last started first. */
export interface Start {
  /** The real app over a fresh database (see `startTestApp`). */
  app(overrides?: ConfigOverrides, shared?: DatabaseConfig): Promise<TestApp>;
  /** The fake OpenAI-compatible server, for `llm: { baseUrl }`. */
  fakeOpenAI(script?: Script): Promise<FakeOpenAI>;
  /** Anything else with `close()` or `stop()`: nginx, Chromium, a fake tool service, a Redis. */
  service<T extends Closable>(starting: Promise<T>): Promise<T>;
  /** Anything else, ended by `end` (a database dropped). */
  service<T>(starting: Promise<T>, end: (started: T) => unknown): Promise<T>;
}

/**
 * The servers the tests of a file (or of the `describe` it is called in) share: `setup` starts
 * them once before those tests, and all it started is closed after them, last started first.
 * Once per file, not per test: each app start makes and migrates a database of its own.
 *
 * Also when `setup` fails halfway or its hook times out: vitest runs `afterAll` then, while the
 * start may still be under way. The teardown closes what has started, waits for `setup` to end,
 * and closes at once whatever arrives after it began, so that nothing outlives the file.
 */
export function setUp(setup: (start: Start) => Promise<void>): void {
  let scope: Scope | undefined;
  let running: Promise<void> = Promise.resolve();
  beforeAll(async () => {
    scope = new Scope();
    running = setup(scope.start);
    await running;
  });
  afterAll(() => scope?.close(running));
}

/**
 * `setUp` run now, for a file that needs what it starts while its tests are being collected
 * (the fuzz tests derive their generators from the seeded data): returns what `setup` returns,
 * closes it all after the file's tests, and at once if `setup` throws.
 */
export async function setUpNow<T>(setup: (start: Start) => Promise<T>): Promise<T> {
  const scope = new Scope();
  afterAll(() => scope.close(Promise.resolve()));
  try {
    return await setup(scope.start);
  } catch (e) {
    await scope.close(Promise.resolve()).catch(() => {});
    throw e;
  }
}

const closeOrStop = (started: unknown) => {
  const s = started as Closable;
  return 'close' in s ? s.close() : s.stop();
};

class Scope {
  private readonly ends: (() => unknown)[] = [];
  /** Starts under way: one may outlive a setup that failed early (one of several started together). */
  private readonly starting = new Set<Promise<unknown>>();
  private closing = false;

  readonly start: Start = {
    app: (overrides, shared) => this.add(startTestApp(overrides, shared)),
    fakeOpenAI: (script) => this.add(startFakeOpenAI(script)),
    service: <T>(starting: Promise<T>, end?: (started: T) => unknown) => this.add(starting, end),
  };

  private add<T>(starting: Promise<T>, end: (started: T) => unknown = closeOrStop): Promise<T> {
    const added = this.keep(starting, end);
    this.starting.add(added);
    const settled = () => void this.starting.delete(added);
    added.then(settled, settled);
    return added;
  }

  private async keep<T>(starting: Promise<T>, end: (started: T) => unknown): Promise<T> {
    const started = await starting;
    if (this.closing) {
      // The teardown has begun (the start outlived its hook): this must not be left running.
      await end(started);
      throw new Error('set-up: started after the teardown began (the setup hook failed or timed out)');
    }
    this.ends.push(() => end(started));
    return started;
  }

  /** Ends everything, even when one end throws; then reports the first failure. */
  async close(setup: Promise<unknown>) {
    this.closing = true;
    const failures: unknown[] = [];
    const endAll = async () => {
      for (const end of this.ends.splice(0).reverse()) {
        try {
          await end();
        } catch (e) {
          failures.push(e);
        }
      }
    };
    await endAll();
    // Their failures are the hook's, reported already; what matters here is that nothing is still starting.
    await setup.catch(() => {});
    while (this.starting.size) await Promise.allSettled([...this.starting]);
    await endAll();
    if (failures.length) throw failures[0];
  }
}
