import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { expectError, rawRequest } from '../helpers/rest-helpers.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { unsafeUrls } from '../helpers/unsafe-urls.ts';

/** What an attacker with a key of their own sends over REST, and what comes back. */

let t: TestApp;
let alice: TestUser;
let bob: TestUser;

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
});

describe('URLs a user gives are http or https only', () => {
  it.each(unsafeUrls)('an agent image %j is refused with 400 and nothing changes', async (url) => {
    const agent = await fixtures(t).agent(bob, { image: 'https://cdn.example.com/bob.png' });
    const res = await t.rest('PATCH', `/v2/agents/${agent.id}`, { key: bob.apiKey, body: { image: url, public: true } });
    expectError(res, 400, 'error', 'image: must be an http or https URL');
    const row = await t.db.agent.findUniqueOrThrow({ where: { id: agent.id }, include: { user: true } });
    expect([row.image, row.user.userImage]).toEqual(['https://cdn.example.com/bob.png', 'https://cdn.example.com/bob.png']);
  });

  it.each(unsafeUrls)('a concept image %j is refused with 400 naming images[i].image', async (url) => {
    const concept = await fixtures(t).concept(bob);
    const res = await t.rest('PATCH', `/v2/concepts/${concept.id}`, {
      key: bob.apiKey,
      body: { images: [{ image: 'https://example.com/ok.png' }, { image: url, usage_instructions: 'side' }] },
    });
    expectError(res, 400, 'message', 'images[1].image: must be an http or https URL');
    expect((await t.db.conceptImage.findMany({ where: { conceptId: concept.id } })).map((i) => i.image)).toEqual([
      'https://example.com/a.jpg',
    ]);
  });

  it.each(unsafeUrls)('a message attachment %j is refused with 400 naming attachments[i]', async (url) => {
    const agent = await fixtures(t).agent(bob);
    const res = await t.rest('POST', '/v2/sessions', {
      key: bob.apiKey,
      body: { agent_ids: [agent.id], content: 'look', attachments: [url] },
    });
    expectError(res, 400, 'message', 'attachments[0]: must be an http or https URL');
  });

  it('http and https URLs are accepted', async () => {
    const agent = await fixtures(t).agent(bob);
    for (const image of ['http://cdn.example.com/a.png', 'https://cdn.example.com/b.png?size=2']) {
      expect((await t.rest('PATCH', `/v2/agents/${agent.id}`, { key: bob.apiKey, body: { image } })).status).toBe(200);
    }
  });
});

describe('agent keys are unique after case folding and Unicode normalization', () => {
  it.each([
    ['ALICE', "another user's name in capitals"],
    ['Alice', "another user's name capitalised"],
  ])('renaming an agent to %s (%s) is a 409 with the conflict error', async (key) => {
    const agent = await fixtures(t).agent(bob);
    const res = await t.rest('PATCH', `/v2/agents/${agent.id}`, { key: bob.apiKey, body: { key, name: 'Alice', public: true } });
    expectError(res, 409, 'error', 'An agent with this key already exists');
    expect((await t.db.user.findUniqueOrThrow({ where: { id: agent.id } })).username).not.toBe(key);
  });

  it("an agent key differing from another agent's only in case is a 409", async () => {
    await fixtures(t).agent(alice, { key: 'muse' });
    const squatter = await fixtures(t).agent(bob);
    const res = await t.rest('PATCH', `/v2/agents/${squatter.id}`, { key: bob.apiKey, body: { key: 'MUSE' } });
    expectError(res, 409, 'error', 'An agent with this key already exists');
  });

  it('the database refuses the clash too, whatever path the write takes', async () => {
    await expect(t.db.user.create({ data: { username: 'BOB' } })).rejects.toMatchObject({ code: 'P2002' });
    await expect(t.db.user.create({ data: { username: 'ｂｏｂ' } })).rejects.toMatchObject({ code: 'P2002' });
  });
});

describe('names are looked up as own keys only, never through the prototype chain', () => {
  it.each(['constructor', 'toString', 'hasOwnProperty'])('tools.%s is an unknown tool, named as sent', async (name) => {
    const agent = await fixtures(t).agent(bob);
    const res = await t.rest('PATCH', `/v2/agents/${agent.id}`, { key: bob.apiKey, body: { tools: { [name]: true } } });
    expectError(res, 400, 'error', `tools.${name}: unknown tool "${name}" (see the tools list)`);
  });

  it('a body with a __proto__ key is refused, not silently dropped', async () => {
    const agent = await fixtures(t).agent(bob, { tools: { flux_dev: true } });
    for (const body of [
      '{"tools":{"__proto__":{"flux_dev":false}}}',
      '{"__proto__":{"name":"x"}}',
      '{"llm_settings":{"constructor":{"prototype":{}}}}',
    ]) {
      const res = await rawRequest(t, 'PATCH', `/v2/agents/${agent.id}`, {
        key: bob.apiKey,
        body,
        headers: { 'content-type': 'application/json' },
      });
      expect(res.status, body).toBe(400);
      expect(JSON.parse(res.text).message).toMatch(/^Malformed JSON in request body: .*(prototype|constructor)/);
    }
    expect((await t.db.agent.findUniqueOrThrow({ where: { id: agent.id } })).tools).toEqual({ flux_dev: true });
  });

  it('query parameters named like prototype members are ordinary unknown parameters', async () => {
    const res = await t.rest('GET', '/v2/sessions?constructor=1&limit=2', { key: bob.apiKey });
    expect(res.status).toBe(200);
  });

  it('a reaction named like a prototype member is refused like any name outside the set, and changes nothing', async () => {
    const agent = await fixtures(t).agent(bob);
    const sessionId = (await t.rest('POST', '/v2/sessions', { key: bob.apiKey, body: { agent_ids: [agent.id], content: 'hi' } })).body
      .session_id;
    const reply = (await settledSession(t, bob, sessionId)).messages.at(-1);
    for (const reaction of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      const res = await t.rest('POST', '/v2/sessions/react', { key: bob.apiKey, body: { message_id: reply.id, reaction } });
      expect(res.status, reaction).toBe(400);
      expect(res.body.message, reaction).toMatch(/^reaction: must be one of /);
    }
    expect((await settledSession(t, bob, sessionId)).messages.at(-1).reactions).toEqual({});
  });
});
