import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { isMemoryRequest, type FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { newSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

// On shutdown the reply engine drains: replies that finish within the grace period are saved,
// and so is what they taught their agent, whose extraction starts only once the reply is done.

let llm: FakeOpenAI;
const apps: TestApp[] = [];

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Noted', '.'] });
});
afterAll(() => Promise.all(apps.map((t) => t.close())));

/** A service of its own for each test: a drain is for good (it happens once, on shutdown). */
async function service() {
  const t = await startTestApp({ llm: { baseUrl: llm.baseUrl } });
  apps.push(t);
  const alice = await t.createUser('alice');
  const agentId = (await fixtures(t).agent(alice, { name: 'Muse', key: 'muse' })).id;
  const memories = () => t.db.memory.findMany({ where: { agentId, userId: alice.id }, select: { fact: true } });
  /** Sends a prompt; resolves once the memory extraction of its exchange has been asked for. */
  const exchange = async (content: string) => {
    const before = llm.requests.length;
    await newSession(t, alice, [agentId], { content });
    await expect.poll(() => llm.requests.slice(before).some(isMemoryRequest), { timeout: 10_000 }).toBe(true);
  };
  return { t, memories, exchange };
}

/** Holds the memory extraction of the next exchanges until the test lets it go. */
function holdMemories(facts: string) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  llm.choose((r) => (isMemoryRequest(r) ? { tokens: [facts], gate: () => released } : undefined));
  return release;
}

describe('draining the reply engine', () => {
  // Started before each test, not inside it: what a test times is its drain, not a start-up.
  let s: Awaited<ReturnType<typeof service>>;
  beforeEach(async () => {
    s = await service();
  });

  it('waits for the memories of replies that completed, within the grace period', async () => {
    const { t, memories, exchange } = s;
    const release = holdMemories('Lives in Porto');
    await exchange('I live in Porto.');
    const drained = t.services.replies.drain(30_000);
    release();
    await drained;
    // Kept before the drain ended: the database closes right after it.
    expect(await memories()).toEqual([{ fact: 'Lives in Porto' }]);
  });

  it('gives up an extraction still running when the grace period ends', async () => {
    const { t, memories, exchange } = s;
    const release = holdMemories('Likes rain');
    await exchange('I like rain.');
    await t.services.replies.drain(200);
    // The call was given up (not left to run for its own 30 s), so an answer coming now is not kept.
    await expect.poll(() => llm.requests.filter(isMemoryRequest).at(-1)!.cutOff, { timeout: 10_000 }).toBe(true);
    release();
    expect(await memories()).toEqual([]);
  });
});
