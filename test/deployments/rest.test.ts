import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { type FakeTelegram, startFakeTelegram } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { openSse } from '../helpers/sse.ts';
import { expectRejectsBadKeys } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * Deployments over REST, as the original's routes take them: deploy (the token checked with
 * Telegram's getMe, sealed), list, change, stop, delete; one per platform per agent; for the
 * agent's owner only. The deployment then runs against the fake Telegram (its polling is seen).
 */
let t: TestApp;
let tg: FakeTelegram;
let f: ReturnType<typeof fixtures>;
let alice: TestUser;
let bob: TestUser;
/** Every response body this file received, searched for tokens at the end. */
const seen: string[] = [];
const tokens: string[] = [];

setUp(async (start) => {
  tg = await start.service(startFakeTelegram());
  t = await start.app({ deployments: { leaseMs: 1_500, telegram: { apiUrl: tg.apiUrl, pollTimeoutS: 1 } } });
  f = fixtures(t);
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
});

async function rest(method: string, path: string, key: string, body?: unknown) {
  const res = await t.rest(method, path, { key, body });
  seen.push(JSON.stringify(res.body));
  return res;
}
const newToken = (name?: string) => {
  const token = tg.addBot(name);
  tokens.push(token);
  return token;
};
const rowsOf = (agentId: string) => t.db.deployment.findMany({ where: { agentId }, omit: { secrets: false } });

describe('deploying an agent to Telegram', () => {
  it('checks the token with getMe, seals it, starts polling, and answers {deploymentId} (and the SDK’s deployment_id)', async () => {
    const agent = await f.agent(alice, { public: false });
    const token = newToken('lighthouse_bot');
    const res = await rest('POST', `/v2/agents/${agent.id}/deployments`, alice.apiKey, {
      agentId: agent.id,
      platform: 'telegram',
      secrets: { telegram: { token } },
      config: { telegram: { topic_allowlist: [{ id: '-100123', note: 'our group' }] }, daily_manna_cap: 20 },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ deploymentId: expect.any(String), deployment_id: res.body.deploymentId });
    expect(tg.calls(token, 'getMe').map((c) => c.answer)).toEqual(['ok']);

    // Sealed: the column holds ciphertext bound to the row, never the token.
    const [row] = await rowsOf(agent.id);
    expect(row!.id).toBe(res.body.deploymentId);
    expect(JSON.stringify(row!.secrets)).not.toContain(token);
    expect(JSON.stringify(row!.secrets)).not.toContain(token.split(':')[1]);
    expect((row!.secrets as { sealed: string }).sealed).toMatch(/^v1\.[\w-]+\.[\w-]+\.[\w-]+\.[\w-]+$/);

    // Running: the one instance long-polls getUpdates with the token.
    await tg.until(() => tg.polling(token).now === 1, 20_000, 'a long poll');

    const list = await rest('GET', `/v2/agents/${agent.id}/deployments`, alice.apiKey);
    expect(list.status).toBe(200);
    expect(list.body.deployments).toHaveLength(1);
    expect(list.body.deployments[0]).toMatchObject({
      _id: row!.id,
      id: row!.id,
      user: alice.id,
      platform: 'telegram',
      valid: true,
      state: 'running',
      last_error: null,
      account: '@lighthouse_bot',
      config: {
        telegram: { topic_allowlist: [{ id: '-100123', note: 'our group' }] },
        discord: { channel_allowlist: [] },
        daily_manna_cap: 20,
      },
      agent: { _id: agent.id, username: agent.user.username, owner: { _id: alice.id } },
    });
    expect(Object.keys(list.body.deployments[0])).not.toContain('secrets');

    // Operation 15 lists it with the agent as an id, and no secrets.
    const mine = await rest('GET', '/v2/agents/deployments', alice.apiKey);
    expect(mine.body.deployments.map((d: any) => [d.id, d.agent, d.state])).toEqual([[row!.id, agent.id, 'running']]);
    expect(Object.keys(mine.body.deployments[0]).sort()).toEqual(
      ['_id', 'account', 'agent', 'config', 'createdAt', 'id', 'last_error', 'platform', 'state', 'updatedAt', 'user', 'valid'].sort(),
    );
  });

  it('refuses a token Telegram refuses with 400 naming the field, and stores nothing', async () => {
    const agent = await f.agent(alice);
    const token = newToken();
    tg.revoke(token);
    const res = await rest('POST', `/v2/agents/${agent.id}/deployments`, alice.apiKey, {
      platform: 'telegram',
      secrets: { telegram: { token } },
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'secrets.telegram.token: Telegram refused this bot token (getMe answered Unauthorized)' });
    expect(await rowsOf(agent.id)).toEqual([]);
  });

  it('refuses what is not a bot token without asking Telegram, a missing token, and platforms not offered yet', async () => {
    const agent = await f.agent(alice);
    // Deployments made by earlier tests still poll with their own tokens: only other calls count.
    const asked = () => tg.calls().filter((c) => !tokens.includes(c.token)).length;
    const before = asked();
    const malformed = await rest('POST', `/v2/agents/${agent.id}/deployments`, alice.apiKey, {
      platform: 'telegram',
      secrets: { telegram: { token: '../../getMe?x=' } },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toMatch(/^secrets\.telegram\.token: is not a Telegram bot token/);
    expect(asked()).toBe(before);

    const missing = await rest('POST', `/v2/agents/${agent.id}/deployments`, alice.apiKey, { platform: 'telegram' });
    expect(missing).toMatchObject({ status: 400, body: { error: 'secrets.telegram.token: is required to deploy to telegram' } });
    const discord = await rest('POST', `/v2/agents/${agent.id}/deployments`, alice.apiKey, {
      platform: 'discord',
      secrets: { discord: { token: 'x' } },
    });
    expect(discord).toMatchObject({
      status: 400,
      body: { error: 'platform: deployments to discord are not available yet (available: telegram)' },
    });
    const unknown = await rest('POST', `/v2/agents/${agent.id}/deployments`, alice.apiKey, { platform: 'myspace' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatch(/^platform: must be one of/);
    const badConfig = await rest('POST', `/v2/agents/${agent.id}/deployments`, alice.apiKey, {
      platform: 'telegram',
      secrets: { telegram: { token: newToken() } },
      config: { telegram: { topic_allowlist: [{ id: 'general' }] } },
    });
    expect(badConfig.status).toBe(400);
    expect(badConfig.body.error).toMatch(/^config\.telegram\.topic_allowlist\[0\]\.id: must be a Telegram chat id/);
    expect(await rowsOf(agent.id)).toEqual([]);
  });

  it('answers 503 when Telegram cannot be reached to check the token, storing nothing', async () => {
    const agent = await f.agent(alice);
    const token = newToken();
    tg.down();
    try {
      const res = await rest('POST', `/v2/agents/${agent.id}/deployments`, alice.apiKey, {
        platform: 'telegram',
        secrets: { telegram: { token } },
      });
      expect(res.status).toBe(503);
      expect(res.body).toEqual({ error: 'Telegram could not be reached to check the bot token; nothing was saved, try again' });
    } finally {
      tg.up();
    }
    expect(await rowsOf(agent.id)).toEqual([]);
  });

  it("is the agent's owner's alone: another user gets 401, an unknown agent 404", async () => {
    const agent = await f.agent(alice, { public: true });
    const token = newToken();
    const body = { platform: 'telegram', secrets: { telegram: { token } } };
    for (const [method, path, sent] of [
      ['POST', `/v2/agents/${agent.id}/deployments`, body],
      ['GET', `/v2/agents/${agent.id}/deployments`, undefined],
      ['PATCH', `/v2/agents/${agent.id}/deployments`, { platform: 'telegram', config: {} }],
      ['POST', `/v2/agents/${agent.id}/deployments/stop`, { platform: 'telegram' }],
      ['DELETE', `/v2/agents/${agent.id}/deployments/telegram`, undefined],
    ] as const) {
      const res = await rest(method, path, bob.apiKey, sent);
      expect(res, `${method} ${path}`).toMatchObject({
        status: 401,
        body: { error: "Only the agent's owner can deploy it or change its deployments" },
      });
      const none = await rest(method, path.replace(agent.id, 'no-such-agent'), alice.apiKey, sent);
      expect(none, `${method} ${path} (unknown agent)`).toMatchObject({ status: 404, body: { error: 'Agent not found' } });
    }
    expect(tg.calls(token)).toEqual([]);
    expect(await expectRejectsBadKeys(t, 'POST', `/v2/agents/${agent.id}/deployments`, body)).toBe(true);
  });

  it('keeps one deployment per platform: deploying again changes and restarts it; PATCH changes config or token; stop and delete', async () => {
    const agent = await f.agent(alice);
    const first = newToken();
    const path = `/v2/agents/${agent.id}/deployments`;
    const events = await openSse(`${t.url}/v2/agents/deployments/events?agent_id=${agent.id}`, { headers: { 'x-api-key': alice.apiKey } });
    expect(events.status).toBe(200);
    const made = await rest('POST', path, alice.apiKey, { platform: 'telegram', secrets: { telegram: { token: first } } });
    await tg.until(() => tg.polling(first).now === 1, 20_000, 'polling with the first token');

    const patched = await rest('PATCH', path, alice.apiKey, { platform: 'telegram', config: { chat_messages_per_minute: 3 } });
    expect(patched).toMatchObject({ status: 200, body: { deploymentId: made.body.deploymentId } });
    const empty = await rest('PATCH', path, alice.apiKey, { platform: 'telegram' });
    expect(empty).toMatchObject({ status: 400, body: { error: 'No deployment fields to update in the request (config, secrets)' } });

    // A new token moves the polling over to it.
    const second = newToken('second_bot');
    const swapped = await rest('PATCH', path, alice.apiKey, { platform: 'telegram', secrets: { telegram: { token: second } } });
    expect(swapped.status).toBe(200);
    await tg.until(() => tg.polling(second).now === 1 && tg.polling(first).now === 0, 20_000, 'polling with the second token only');

    const stopped = await rest('POST', `${path}/stop`, alice.apiKey, { platform: 'telegram' });
    expect(stopped).toMatchObject({ status: 200, body: { success: true } });
    await tg.until(() => tg.polling(second).now === 0, 20_000, 'polling to stop');
    let list = await rest('GET', path, alice.apiKey);
    expect(list.body.deployments.map((d: any) => [d.state, d.account, d.config.chat_messages_per_minute])).toEqual([
      ['stopped', '@second_bot', 3],
    ]);

    // Deploying again (no secrets needed now) starts the same deployment; a null bound goes back to the default.
    const again = await rest('POST', path, alice.apiKey, { platform: 'telegram', config: { chat_messages_per_minute: null } });
    expect(again.body.deploymentId).toBe(made.body.deploymentId);
    await tg.until(() => tg.polling(second).now === 1, 20_000, 'polling again');
    list = await rest('GET', path, alice.apiKey);
    expect(list.body.deployments).toHaveLength(1);
    expect(list.body.deployments[0].state).toBe('running');
    expect(list.body.deployments[0].config).not.toHaveProperty('chat_messages_per_minute');

    const deleted = await rest('DELETE', `${path}/telegram`, alice.apiKey);
    expect(deleted).toMatchObject({ status: 200, body: { success: true } });
    await tg.until(() => tg.polling(second).now === 0, 20_000, 'polling to end');
    expect(await rowsOf(agent.id)).toEqual([]);
    expect(await rest('DELETE', `${path}/telegram`, alice.apiKey)).toMatchObject({ status: 404, body: { error: 'Deployment not found' } });
    expect(await rest('POST', `${path}/stop`, alice.apiKey, { platform: 'telegram' })).toMatchObject({ status: 404 });
    expect(await rest('DELETE', `${path}/nowhere`, alice.apiKey)).toMatchObject({ status: 400 });

    // Its owner followed it all on the stream: its last event says it was deleted, stopped.
    await events.waitFor((e) => e.data.data.deleted === true);
    events.close();
    const states = events.frames.map((e) => e.data.data);
    expect(states[0]).toMatchObject({
      type: 'deployment_state',
      deployment_id: made.body.deploymentId,
      agent_id: agent.id,
      state: 'running',
    });
    expect(states.map((s) => s.state)).toContain('stopped');
    expect(states.at(-1)).toEqual({
      type: 'deployment_state',
      deployment_id: made.body.deploymentId,
      agent_id: agent.id,
      platform: 'telegram',
      state: 'stopped',
      valid: true,
      last_error: null,
      deleted: true,
    });
    expect(states.slice(0, -1).every((s) => s.deleted === false)).toBe(true);
    seen.push(JSON.stringify(events.frames));
  });

  it("streams only the caller's own deployments: another user's agent is 401, an unknown one 404", async () => {
    const agent = await f.agent(alice);
    const streamOf = (key: string, agentId: string) =>
      fetch(`${t.url}/v2/agents/deployments/events?agent_id=${agentId}`, { headers: { 'x-api-key': key } });
    const theirs = await streamOf(bob.apiKey, agent.id);
    expect([theirs.status, await theirs.json()]).toEqual([401, { error: expect.any(String) }]);
    const unknown = await streamOf(alice.apiKey, 'nope');
    expect([unknown.status, await unknown.json()]).toEqual([404, { error: 'Agent not found' }]);
  });

  it('never put a token in any response', () => {
    expect(tokens.length).toBeGreaterThan(3);
    for (const body of seen) for (const token of tokens) expect(body).not.toContain(token.split(':')[1]);
  });
});
