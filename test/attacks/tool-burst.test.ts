import { describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Done.'] });
  // Caps below the defaults (8 per model call): the machine running the tests is shared.
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, work: { toolCallsPerModelCall: 4 } });
  alice = await t.createUser('alice');
  await t.services.manna.grant('alice', '1000', 'subscription');
});

const paint = (i: number) => ({
  id: `call_${i}`,
  name: 'flux_schnell',
  arguments: JSON.stringify({ prompt: `lighthouse number ${i} at dusk`, n_samples: 6, resolution: '1024x1024' }),
});

describe('a burst of paid image tools in one model call', () => {
  it('runs only as many as the caps allow, tells the model about the rest, and /healthz answers 200 all along', async () => {
    const agent = await fixtures(t).agent(alice, { name: 'Painter', key: 'painter-burst', tools: { flux_schnell: true } });
    llm.enqueue({ toolCalls: Array.from({ length: 16 }, (_, i) => paint(i)) }, { tokens: ['All painted.'] });
    const started = await t.rest('POST', '/v2/sessions', {
      key: alice.apiKey,
      body: { agent_ids: [agent.id], content: 'paint 16 lighthouses' },
    });
    expect(started.status).toBe(200);
    const sessionId = started.body.session_id as string;

    const health: number[] = [];
    let settled = false;
    const polling = (async () => {
      for (let i = 0; i < 2_000 && !settled; i++) {
        health.push((await fetch(`${t.url}/healthz`)).status);
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    const done = await settledSession(t, alice, sessionId);
    settled = true;
    await polling;

    expect(health.length).toBeGreaterThan(0);
    expect(health.filter((s) => s !== 200)).toEqual([]);
    const reply = done.messages.find((m: { role: string }) => m.role === 'assistant');
    expect(reply.status).toBe('complete');
    const calls = reply.tool_calls as { status: string; error: string | null }[];
    expect(calls).toHaveLength(16);
    expect(calls.slice(0, 4).map((c) => c.status)).toEqual(Array(4).fill('completed'));
    for (const c of calls.slice(4))
      expect(c).toMatchObject({ status: 'failed', error: expect.stringMatching(/at most 4 run per model call/) });
    // Four calls of six images each were made and charged; the other twelve cost nothing.
    expect(await t.db.creation.count({ where: { userId: alice.id, tool: 'flux_schnell' } })).toBe(24);
    expect((await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).body.balance).toBe(1000 - 4 * 6 * 0.25);
    // The model was told which calls did not run, and why.
    const told = llm
      .replyRequests()[1]!
      .body.messages.filter((m) => m.role === 'tool')
      .map((m) => JSON.parse(m.content!));
    expect(told.filter((r) => /at most 4 run per model call/.test(r.error ?? ''))).toHaveLength(12);
  });

  it('a reply keeps to its total of tool calls over several model calls', async () => {
    const small = await startTestApp({ llm: { baseUrl: llm.baseUrl }, work: { toolCallsPerReply: 3 } });
    try {
      const bob = await small.createUser('bob');
      await small.services.manna.grant('bob', '100', 'subscription');
      const agent = await fixtures(small).agent(bob, { name: 'Painter', key: 'painter-reply', tools: { flux_schnell: true } });
      const one = (i: number) => ({
        ...paint(i),
        arguments: JSON.stringify({ prompt: `tiny ${i}`, n_samples: 1, resolution: '1024x1024' }),
      });
      llm.reset();
      llm.enqueue({ toolCalls: [one(1), one(2)] }, { toolCalls: [one(3), one(4)] }, { tokens: ['Enough.'] });
      const res = await small.rest('POST', '/v2/sessions', { key: bob.apiKey, body: { agent_ids: [agent.id], content: 'paint' } });
      const done = await settledSession(small, bob, res.body.session_id);
      const calls = done.messages.find((m: { role: string }) => m.role === 'assistant').tool_calls as { status: string; error: string }[];
      expect(calls.map((c) => c.status)).toEqual(['completed', 'completed', 'completed', 'failed']);
      expect(calls[3]!.error).toMatch(/at most 3 run per reply/);
    } finally {
      await small.close();
    }
  });
});
