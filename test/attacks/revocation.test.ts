import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let mallory: TestUser;

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Sure.'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl } });
  alice = await t.createUser('alice');
  mallory = await t.createUser('mallory');
  await t.services.manna.grant('alice', '100', 'subscription');
});

const balanceOf = async (user: TestUser) => (await t.rest('GET', '/v2/creators/me', { key: user.apiKey })).body.balance as number;
const paidCall = {
  id: 'call_paint',
  name: 'flux_schnell',
  arguments: JSON.stringify({ prompt: 'a gift', n_samples: 1, resolution: '1024x1024' }),
};

describe('an agent made private', () => {
  it("stops answering a stranger's existing session, and stops charging its owner", async () => {
    const patron = await fixtures(t).agent(alice, {
      name: 'Patron',
      key: 'patron-private',
      ownerPays: 'full',
      tools: { flux_schnell: true },
    });
    llm.enqueue({ toolCalls: [paidCall] }, { tokens: ['On me.'] });
    const started = await t.rest('POST', '/v2/sessions', {
      key: mallory.apiKey,
      body: { agent_ids: [patron.id], content: 'paint me a gift' },
    });
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    const sessionId = started.body.session_id as string;
    await settledSession(t, mallory, sessionId);
    const charged = await balanceOf(alice);
    expect(charged).toBeLessThan(100);

    expect((await t.rest('PATCH', `/v2/agents/${patron.id}`, { key: alice.apiKey, body: { public: false } })).status).toBe(200);
    expect((await t.rest('GET', `/v2/agents/${patron.id}`, { key: mallory.apiKey })).status).toBeGreaterThanOrEqual(400);
    const modelCalls = llm.replyRequests().length;

    // Mallory posts again, to the session at large and to the agent by name: both refused.
    llm.enqueue({ toolCalls: [paidCall] }, { tokens: ['On me again.'] });
    const again = await t.rest('POST', '/v2/sessions', { key: mallory.apiKey, body: { session_id: sessionId, content: 'another one' } });
    expect(again.status).toBe(403);
    expect(again.body.message).toMatch(/no longer usable/);
    const named = await t.rest('POST', '/v2/sessions', {
      key: mallory.apiKey,
      body: { session_id: sessionId, agent_ids: [patron.id], content: 'another one' },
    });
    expect(named.status).toBe(403);
    expect(named.body.message).toMatch(/no longer usable/);

    const after = await settledSession(t, mallory, sessionId);
    expect(after.messages.filter((m: { role: string }) => m.role === 'user')).toHaveLength(1);
    expect(llm.replyRequests().length).toBe(modelCalls);
    expect(await balanceOf(alice)).toBe(charged);

    // Its owner still may use it in a session of her own.
    llm.reset();
    const own = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { agent_ids: [patron.id], content: 'hello' } });
    expect(own.status).toBe(200);
    const mine = await settledSession(t, alice, own.body.session_id);
    expect(mine.messages.at(-1)).toMatchObject({ role: 'assistant', status: 'complete' });
  });
});

describe('the hidden paid helper prompt_enhance', () => {
  it("is never offered, nor run, unless the agent's owner turned it on", async () => {
    const patron = await fixtures(t).agent(alice, { name: 'Helper', key: 'helper-off', ownerPays: 'full', tools: { flux_schnell: true } });
    const before = await balanceOf(alice);
    llm.reset();
    // A model asking for it anyway (it knows the name) is told there is no such tool; nobody pays.
    llm.enqueue(
      { toolCalls: [{ id: 'call_enhance', name: 'prompt_enhance', arguments: '{"prompt":"cat","max_tokens":500}' }] },
      { tokens: ['Ok.'] },
    );
    const res = await t.rest('POST', '/v2/sessions', { key: mallory.apiKey, body: { agent_ids: [patron.id], content: 'enhance' } });
    expect(res.status).toBe(200);
    const done = await settledSession(t, mallory, res.body.session_id);
    const offered = llm.replyRequests()[0]!.body.tools!.map((x) => x.function.name);
    expect(offered).toEqual(['flux_schnell']);
    const reply = done.messages.find((m: { role: string }) => m.role === 'assistant');
    expect(reply.tool_calls[0]).toMatchObject({ tool: 'prompt_enhance', status: 'failed', error: expect.stringMatching(/no tool named/) });
    expect(await balanceOf(alice)).toBe(before);

    // Turned on by its owner, it is offered, and charges her as owner_pays says.
    expect(
      (await t.rest('PATCH', `/v2/agents/${patron.id}`, { key: alice.apiKey, body: { tools: { prompt_enhance: true } } })).status,
    ).toBe(200);
    llm.reset();
    llm.enqueue(
      { toolCalls: [{ id: 'call_enhance', name: 'prompt_enhance', arguments: '{"prompt":"cat","max_tokens":500}' }] },
      { tokens: ['Ok.'] },
    );
    const on = await t.rest('POST', '/v2/sessions', { key: mallory.apiKey, body: { agent_ids: [patron.id], content: 'enhance' } });
    await settledSession(t, mallory, on.body.session_id);
    expect(llm.replyRequests()[0]!.body.tools!.map((x) => x.function.name)).toContain('prompt_enhance');
    expect(await balanceOf(alice)).toBe(before - 0.5);
  });
});
