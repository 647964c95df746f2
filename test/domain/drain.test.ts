import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { EventBus } from '../../src/domain/core/bus.ts';
import { memoryService, memoryStore } from '../../src/domain/memories/index.ts';
import { createReplyEngine, replyStore, withOneRetry } from '../../src/domain/replies/index.ts';
import { sessionTitles } from '../../src/domain/sessions/index.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { chatProviderFor } from '../../src/providers/index.ts';
import { domainConfig, domainDatabase, people, quietLog } from '../helpers/domain-database.ts';
import { sessionsOver } from '../helpers/domain-sessions.ts';
import { isMemoryRequest, startFakeOpenAI, type FakeOpenAI } from '../helpers/fake-openai.ts';

// On shutdown the reply engine drains: replies that finish within the grace period are saved,
// and so is what they taught their agent, whose extraction starts only once the reply is done.
// The reply engine and the memory service over their stores on a migrated database, prompts sent
// through the sessions service, and the model a fake OpenAI server: no app.

const t = domainDatabase();
let llm: FakeOpenAI;
let bus: EventBus;
const stops: (() => void)[] = [];

beforeAll(async () => {
  llm = await startFakeOpenAI({ tokens: ['Noted', '.'] });
  bus = t.bus();
});
afterAll(async () => {
  for (const stop of stops) stop();
  await llm?.close();
});

let users = 0;

/** A reply engine of its own for each test (a drain is for good: it happens once, on shutdown), composed as src/domain/services.ts does. */
async function service() {
  const metrics = createMetrics();
  const llmConfig = { ...domainConfig.llm, baseUrl: llm.baseUrl };
  const chat = chatProviderFor(llmConfig);
  const provider = withOneRetry(chat.provider, metrics.replies.providerError);
  const memories = memoryService(memoryStore(t.db), provider, { offline: chat.offline, model: llmConfig.models.default }, quietLog);
  const replies = createReplyEngine({
    store: replyStore(t.db, sessionTitles(t.db)),
    bus,
    provider,
    offline: chat.offline,
    llm: llmConfig,
    memory: memories.host,
    instanceId: 'test-instance',
    log: quietLog,
    metrics: metrics.replies,
  });
  const { sessions, stop } = sessionsOver(t.db, bus, { replies });
  stops.push(stop);
  const make = await people(t.db);
  const alice = await make.user(`alice${++users}`);
  const agentId = (await make.agent(alice, { name: 'Muse', key: `muse${users}` })).id;
  const memoriesKept = () => t.db.memory.findMany({ where: { agentId, userId: alice.id }, select: { fact: true } });
  /** Sends a prompt; resolves once the memory extraction of its exchange has been asked for. */
  const exchange = async (content: string) => {
    const before = llm.requests.length;
    await sessions.send({ id: alice.id }, { agentIds: [agentId], content });
    await expect.poll(() => llm.requests.slice(before).some(isMemoryRequest), { timeout: 10_000 }).toBe(true);
  };
  return { replies, memories: memoriesKept, exchange };
}

/** Holds the memory extraction of the next exchanges until the test lets it go. */
function holdMemories(facts: string) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  llm.choose((r) => (isMemoryRequest(r) ? { tokens: [facts], gate: () => released } : undefined));
  return release;
}

describe('draining the reply engine', () => {
  let s: Awaited<ReturnType<typeof service>>;
  beforeEach(async () => {
    s = await service();
  });

  it('waits for the memories of replies that completed, within the grace period', async () => {
    const { replies, memories, exchange } = s;
    const release = holdMemories('Lives in Porto');
    await exchange('I live in Porto.');
    const drained = replies.drain(30_000);
    release();
    await drained;
    // Kept before the drain ended: in the service the database closes right after it.
    expect(await memories()).toEqual([{ fact: 'Lives in Porto' }]);
  });

  it('gives up an extraction still running when the grace period ends', async () => {
    const { replies, memories, exchange } = s;
    const release = holdMemories('Likes rain');
    await exchange('I like rain.');
    await replies.drain(200);
    // The call was given up (not left to run for its own 30 s), so an answer coming now is not kept.
    await expect.poll(() => llm.requests.filter(isMemoryRequest).at(-1)!.cutOff, { timeout: 10_000 }).toBe(true);
    release();
    expect(await memories()).toEqual([]);
  });
});
