import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * `DELETE /v2/agents/{id}`: the agent's triggers end, its deployments stop with their secrets, its
 * memories go; sessions stay with their owners (the agent's messages remain, it answers no more);
 * nothing of another user's is lost (docs/agents-at-work.md, "Deleting an agent").
 */
describe('deleting an agent', () => {
  let t: TestApp;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;
  let bob: TestUser;

  setUp(async (start) => {
    t = await start.app();
    f = fixtures(t);
    [alice, bob] = [await t.createUser('alice'), await t.createUser('bob')];
  });

  /** Alice's public agent, busy: a trigger, a deployment, memories of both users, bob's session with it, things made with it. */
  async function busyAgent() {
    const agent = await f.agent(alice, { name: 'Busy', image: 'https://cdn.example.com/busy.png' });
    await f.trigger(agent.id, alice.id);
    await f.deployment(agent.id, alice.id);
    const concept = await f.concept(alice, { agent: agent.id });
    const res = await t.rest('POST', '/v2/sessions', { key: bob.apiKey, body: { agent_ids: [agent.id], content: 'Hello, Busy' } });
    const sessionId = res.body.session_id as string;
    const before = await settledSession(t, bob, sessionId);
    for (const user of [alice, bob])
      await t.db.memory.create({
        data: { agentId: agent.id, userId: user.id, sessionId, fact: `Knows ${user.username}`, key: user.username },
      });
    const creation = await f.creation(bob, { agentId: agent.id });
    return { agent, concept, sessionId, before, creation };
  }

  it('takes its triggers, deployments (their secrets with them) and memories; sessions, messages, creations and concepts stay', async () => {
    const { agent, concept, sessionId, before, creation } = await busyAgent();
    const balances = await t.db.user.findMany({ where: { id: { in: [alice.id, bob.id] } }, select: { id: true, foreverBalance: true } });

    const res = await t.rest('DELETE', `/v2/agents/${agent.id}`, { key: alice.apiKey });
    expect(res).toMatchObject({ status: 200, body: { success: true } });

    expect(await t.db.trigger.count({ where: { agentId: agent.id } })).toBe(0);
    expect(await t.db.deployment.count({ where: { agentId: agent.id } })).toBe(0);
    expect(await t.db.memory.count({ where: { agentId: agent.id } })).toBe(0);
    expect((await t.rest('GET', `/v2/agents/${agent.id}`, { key: alice.apiKey })).status).toBe(404);

    // Bob's session is his still, with every message, the agent's reply with its sender's name.
    const after = await settledSession(t, bob, sessionId);
    expect(after.messages.map((m: { id: string }) => m.id)).toEqual(before.messages.map((m: { id: string }) => m.id));
    const reply = after.messages.find((m: { role: string }) => m.role === 'assistant');
    expect(reply.sender).toMatchObject({ _id: agent.id, username: agent.user.username, type: 'agent' });
    expect(after.session.agents).toEqual([]);
    // It answers no more: a prompt is refused, and nothing is saved.
    const prompt = await t.rest('POST', '/v2/sessions', { key: bob.apiKey, body: { session_id: sessionId, content: 'Still there?' } });
    expect(prompt.status).toBe(403);
    expect(prompt.body.message).toMatch(/deleted/);
    expect((await settledSession(t, bob, sessionId)).messages).toHaveLength(before.messages.length);

    expect(await t.db.creation.findUniqueOrThrow({ where: { id: creation.id } })).toMatchObject({
      agentId: null,
      userId: bob.id,
      deleted: false,
    });
    expect(await t.db.concept.findUniqueOrThrow({ where: { id: concept.id } })).toMatchObject({ agentId: null, userId: alice.id });
    expect(await t.db.user.findMany({ where: { id: { in: [alice.id, bob.id] } }, select: { id: true, foreverBalance: true } })).toEqual(
      balances,
    );
    // Its key stays with its messages: a new agent cannot take it and pass for the old one.
    const again = await t.rest('POST', '/v2/agents', { key: alice.apiKey, body: { name: 'Busy again', key: agent.user.username } });
    expect(again).toMatchObject({ status: 409, body: { error: 'An agent with this key already exists' } });
    // A creator profile of it is no longer shown.
    expect((await t.rest('GET', `/v2/creators/${agent.id}`, { key: bob.apiKey })).status).toBe(404);
  });

  it("is its owner's only: others are refused (a private agent is not found) and nothing goes", async () => {
    const { agent } = await busyAgent();
    const refused = await t.rest('DELETE', `/v2/agents/${agent.id}`, { key: bob.apiKey });
    expect(refused).toMatchObject({ status: 401, body: { error: 'Only the owner of this agent can delete it' } });
    const hidden = await f.agent(alice, { public: false });
    const unseen = await t.rest('DELETE', `/v2/agents/${hidden.id}`, { key: bob.apiKey });
    expect(unseen).toEqual(expect.objectContaining({ status: 404, body: { error: 'Agent not found' } }));
    expect((await t.rest('DELETE', '/v2/agents/no-such-agent', { key: alice.apiKey })).status).toBe(404);
    expect(await t.db.agent.count({ where: { id: { in: [agent.id, hidden.id] } } })).toBe(2);
    expect(await t.db.trigger.count({ where: { agentId: agent.id } })).toBe(1);
    expect(await t.db.deployment.count({ where: { agentId: agent.id } })).toBe(1);
    expect(await t.db.memory.count({ where: { agentId: agent.id } })).toBe(2);
  });
});
