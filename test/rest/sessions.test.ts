import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TURN_QUEUE } from '../../src/domain/autonomy/index.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { isTitleRequest, type FakeOpenAI } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { expectAuthError, expectError, expectRejectsBadKeys, isoDate } from '../helpers/rest-helpers.ts';
import { newSession, settledSession, titledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, type SseClient, type SseFrame } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';
import { until } from '../helpers/until.ts';

const NEEDS_BUDGET = 'Session cannot have auto-reply enabled without a set budget';
const MAKER_COST = 50;
const on = (reply_interval = 0) => ({ auto_reply: true, reply_interval, actor_selection_method: 'random_exclude_last' });

let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let bob: TestUser;
let carol: TestUser;
let muse: { id: string };
let remy: { id: string };
let privateAgent: { id: string };

let svc: Awaited<ReturnType<typeof startFakeToolService>>;

// Sessions over REST, on the real app and the fake model; their autonomous loop (last) with the
// job queue polled often and a paid HTTP tool for its manna budget.
setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Hello', ' from', ' the', ' model.'], usage: { prompt_tokens: 40, completion_tokens: 4 } });
  svc = await start.service(startFakeToolService());
  const toolsDir = await toolRegistryWith({ maker: httpTool('maker', svc.url, `${MAKER_COST} * n`) });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, toolsDir, jobs: { pollMs: 500, superviseS: 1 } });
  [alice, bob, carol] = [await t.createUser('alice'), await t.createUser('bob'), await t.createUser('carol')];
  const f = fixtures(t);
  muse = await f.agent(alice, {
    name: 'Muse',
    key: 'muse',
    persona: 'You are Muse, an art director.',
    greeting: 'Hi, I sketch.',
    knowledge: 'Riso inks.',
  });
  remy = await f.agent(bob, { name: 'Remy', key: 'remy' });
  privateAgent = await f.agent(bob, { name: 'Hidden', key: 'hidden', public: false });
});
beforeEach(() => llm.reset());

const post = (user: TestUser, body: unknown) => t.rest('POST', '/v2/sessions', { key: user.apiKey, body });
const countSessions = () => t.db.session.count();

describe('POST /v2/sessions (operation 4)', () => {
  it('creates a session with its first message, answers {session_id} at once, and the agent replies in the background', async () => {
    const res = await post(alice, { agent_ids: [muse.id], content: 'Plan a zine cover', scenario: 'A zine fair in May' });
    expect(res.status).toBe(200);
    // The spec's {session_id}, and the saved prompt's id as the original answered it.
    expect(res.body).toEqual({ session_id: expect.any(String), message_id: expect.any(String) });

    const read = await settledSession(t, alice, res.body.session_id);
    expect(read.messages.map((m: any) => [m.role, m.content, m.status])).toEqual([
      ['eden', 'Muse joined the session', 'complete'],
      ['user', 'Plan a zine cover', 'complete'],
      ['assistant', 'Hello from the model.', 'complete'],
    ]);
    const [, prompt, reply] = read.messages;
    expect(prompt.id).toBe(res.body.message_id);
    expect(prompt._id).toBe(prompt.id);
    expect(prompt.sender_id).toBe(alice.id);
    expect(prompt.sender).toMatchObject({ _id: alice.id, userId: alice.id, username: 'alice', type: 'user' });
    expect(reply).toMatchObject({
      sender_id: muse.id,
      sender: { _id: muse.id, username: 'muse', type: 'agent' },
      prompt_id: prompt.id,
      usage: { prompt_tokens: 40, completion_tokens: 4 },
      error: null,
      createdAt: isoDate,
    });
    expect(read.session).toMatchObject({
      _id: res.body.session_id,
      id: res.body.session_id,
      owner: { _id: alice.id, userId: alice.id, username: 'alice' },
      agents: [{ _id: muse.id, username: 'muse', name: 'Muse' }],
      agent_ids: [muse.id],
      scenario: 'A zine fair in May',
      spent: { tokens: 44, turns: 1, manna: 0 },
    });

    // What the model was given: the persona, greeting, knowledge and scenario, then the conversation.
    const chat = llm.requests.find((r) => r.body.messages.at(-1)?.content === 'Plan a zine cover')!;
    expect(chat.body.stream).toBe(true);
    const system = chat.body.messages[0]!;
    expect(system.role).toBe('system');
    for (const part of ['Muse', 'You are Muse, an art director.', 'Hi, I sketch.', 'Riso inks.', 'A zine fair in May'])
      expect(system.content).toContain(part);
  });

  it('names the session after the first exchange with the model, or from the first 30 characters if the model says no title', async () => {
    llm.choose((r) => (isTitleRequest(r) ? { tokens: ['Riso', ' Zine', ' Cover'] } : undefined));
    const named = await newSession(t, alice, [muse.id], { content: 'Help me with a riso zine cover' });
    await expect
      .poll(async () => (await t.rest('GET', `/v2/sessions/${named}`, { key: alice.apiKey })).body.session.title)
      .toBe('Riso Zine Cover');

    llm.choose((r) => (isTitleRequest(r) ? { tokens: ['Hmm'] } : undefined));
    const fallback = await newSession(t, alice, [muse.id], { content: 'What colours would suit a night market poster?' });
    await expect
      .poll(async () => (await t.rest('GET', `/v2/sessions/${fallback}`, { key: alice.apiKey })).body.session.title)
      .toBe('What colours would suit a nigh');

    const given = await newSession(t, alice, [muse.id], { title: 'My own title' });
    await settledSession(t, alice, given);
    expect((await t.rest('GET', `/v2/sessions/${given}`, { key: alice.apiKey })).body.session.title).toBe('My own title');
  });

  it('continues an existing session; the conversation so far goes to the model', async () => {
    const id = await newSession(t, alice, [muse.id], { content: 'First question' });
    await settledSession(t, alice, id);
    llm.reset();
    const res = await post(alice, { session_id: id, content: 'Second question' });
    expect(res.body).toEqual({ session_id: id, message_id: expect.any(String) });
    const read = await settledSession(t, alice, id);
    expect(read.messages.map((m: any) => m.content).slice(-4)).toEqual([
      'First question',
      'Hello from the model.',
      'Second question',
      'Hello from the model.',
    ]);
    const sent = llm.replyRequests()[0]!.body.messages.map((m) => [m.role, m.content]);
    expect(sent.slice(-3)).toEqual([
      ['user', 'First question'],
      ['assistant', 'Hello from the model.'],
      ['user', 'Second question'],
    ]);
    expect(read.session.spent.turns).toBe(2);
  });

  it('refuses bad input with 400 {message} naming the field, and creates nothing', async () => {
    const before = await countSessions();
    // Which input is refused, and why, is the sessions' rule (test/rules/sessions.test.ts, "what a
    // prompt’s input may be"); here, the 400 {message} naming the field as REST spells it.
    const cases: [unknown, RegExp | string][] = [
      [{ content: 'hi' }, 'agent_ids must be provided when creating a new session'],
      [{ agent_ids: [muse.id, privateAgent.id], content: 'hi' }, 'agent_ids[1]: agent not found or not usable by you'],
      [{ agent_ids: [muse.id], content: 'hi', budget: { token_budget: 999 } }, 'budget.token_budget: must be at least 1000'],
      [{ agent_ids: [muse.id], content: 'hi', attachments: ['javascript:alert(1)'] }, /^attachments\[0\]: /],
      [{ agent_ids: [muse.id], content: 'hi', stream: 'yes' }, 'stream: must be true or false'],
      [[1, 2], 'The request body must be a JSON object'],
    ];
    for (const [body, text] of cases) {
      const res = await post(alice, body);
      expect({ body, status: res.status, keys: Object.keys(res.body ?? {}) }).toEqual({ body, status: 400, keys: ['message'] });
      if (typeof text === 'string') expect(res.body.message).toBe(text);
      else expect(res.body.message).toMatch(text);
    }
    expect(await countSessions()).toBe(before);
  });

  it('404 for an unknown session, 403 for one you are not in; editors may post, only owners change settings', async () => {
    expect(await post(alice, { session_id: 'no-such-session', content: 'hi' })).toMatchObject({
      status: 404,
      body: { message: 'Session not found' },
    });
    const id = await newSession(t, alice, [muse.id]);
    const stranger = await post(carol, { session_id: id, content: 'let me in' });
    expect(stranger).toMatchObject({ status: 403, body: { message: 'You do not have access to this session' } });

    expect(
      (await t.rest('POST', `/v2/sessions/${id}/users`, { key: alice.apiKey, body: { username: 'bob', permission: 'editor' } })).status,
    ).toBe(200);
    expect((await post(bob, { session_id: id, content: 'Bob here' })).status).toBe(200);
    expect(await post(bob, { session_id: id, title: 'Bob renames it' })).toMatchObject({
      status: 403,
      body: { message: 'Only an owner of this session can change its title, scenario or budget' },
    });
    await settledSession(t, alice, id);
    const contents = (await settledSession(t, alice, id)).messages.map((m: any) => m.content);
    expect(contents).toContain('Bob here');
    expect(contents).not.toContain('let me in');
  });

  it('stops at the budgets with the original texts, saving no user message', async () => {
    const turns = await newSession(t, alice, [muse.id], { budget: { turn_budget: 1 } });
    await settledSession(t, alice, turns);
    const res = await post(alice, { session_id: turns, content: 'one more' });
    expect(res).toMatchObject({ status: 400, body: { message: 'Session turn budget exceeded' } });
    expect((await settledSession(t, alice, turns)).messages.map((m: any) => m.content)).not.toContain('one more');

    llm.setDefault({ tokens: ['Long answer'], usage: { prompt_tokens: 900, completion_tokens: 200 } });
    const tokens = await newSession(t, alice, [muse.id], { budget: { token_budget: 1000 } });
    expect((await settledSession(t, alice, tokens)).session.spent.tokens).toBe(1100);
    expect(await post(alice, { session_id: tokens, content: 'more' })).toMatchObject({
      status: 400,
      body: { message: 'Session token budget exceeded' },
    });

    // A prompt needs a turn for each agent that answers: two agents, one turn left, nothing runs.
    const both = await post(alice, { agent_ids: [muse.id, remy.id], content: 'hi both', budget: { turn_budget: 1 } });
    expect(both).toMatchObject({ status: 400, body: { message: 'Session turn budget exceeded' } });
  });

  it('fifty prompts at once at a session with turns for five: exactly five run, the rest get the budget error, the counters end exact', async () => {
    llm.setDefault({ tokens: ['ok'], usage: { prompt_tokens: 10, completion_tokens: 1 } });
    const id = (await post(alice, { agent_ids: [muse.id], budget: { turn_budget: 5 } })).body.session_id;
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => post(alice, { session_id: id, content: `prompt ${i}` })));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 400)).toHaveLength(45);
    for (const r of results.filter((r) => r.status === 400)) expect(r.body).toEqual({ message: 'Session turn budget exceeded' });
    const read = await settledSession(t, alice, id, '?limit=200');
    expect(read.messages.filter((m: any) => m.role === 'user')).toHaveLength(5);
    expect(read.messages.filter((m: any) => m.role === 'assistant' && m.status === 'complete')).toHaveLength(5);
    expect(read.session.spent).toEqual({ manna: 0, tokens: 55, turns: 5 });
    expect(llm.requests.filter((r) => r.body.messages.at(-1)?.content?.startsWith('prompt'))).toHaveLength(5);
  });

  it('answers with the named agents, else the one mentioned, else the first', async () => {
    llm.choose((r) => ({ tokens: [r.body.messages[0]!.content!.includes('You are Muse') ? 'muse says hi' : 'remy says hi'] }));
    const id = await newSession(t, alice, [muse.id, remy.id], { content: 'hello both' });
    let read = await settledSession(t, alice, id);
    expect(read.messages.filter((m: any) => m.role === 'assistant').map((m: any) => [m.sender_id, m.content])).toEqual([
      [muse.id, 'muse says hi'],
      [remy.id, 'remy says hi'],
    ]);
    const replies = async (body: object) => {
      const before = read.messages.length;
      await post(alice, { session_id: id, ...body });
      read = await settledSession(t, alice, id, '?limit=200');
      return read.messages
        .slice(before)
        .filter((m: any) => m.role === 'assistant')
        .map((m: any) => m.sender_id);
    };
    // Who answers is the sessions' rule (test/rules/sessions.test.ts, "who answers a prompt"); here,
    // a mention and REST's agent_ids reach it, and the reply comes from the agent chosen.
    expect(await replies({ content: 'Remy, what is for dinner?' })).toEqual([remy.id]);
    expect(await replies({ content: 'only remy', agent_ids: [remy.id] })).toEqual([remy.id]);
    expect((await post(alice, { session_id: id, content: 'x', agent_ids: [privateAgent.id] })).body).toEqual({
      message: 'agent_ids[0]: agent is not in this session',
    });
  });

  it('creates a session without a message: no reply, no turn spent', async () => {
    const res = await post(alice, { agent_ids: [muse.id] });
    const read = await settledSession(t, alice, res.body.session_id);
    expect(read.messages.map((m: any) => m.role)).toEqual(['eden']);
    expect(read.session.spent.turns).toBe(0);
    // No reply was asked for. (Titles and memories come only from an exchange, which this session
    // has not had; those of the previous test's exchanges may still be arriving.)
    expect(llm.replyRequests()).toHaveLength(0);
  });

  it('refuses a missing or bad key with 401 {error}', async () => {
    await expectRejectsBadKeys(t, 'POST', '/v2/sessions', { agent_ids: [muse.id], content: 'hi' });
  });
});

describe('reading and listing sessions', () => {
  it('GET /v2/sessions lists your sessions, newest activity first, page by page', async () => {
    const dave = await t.createUser('dave');
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await newSession(t, dave, [muse.id], { content: `session ${i}` }));
    // Named first: a new session's title comes after its reply and moves its activity too.
    for (const id of ids) await titledSession(t, dave, id);
    await post(dave, { session_id: ids[0], content: 'bump' });
    await settledSession(t, dave, ids[0]!);

    const first = await t.rest('GET', '/v2/sessions?limit=2', { key: dave.apiKey });
    expect(first.status).toBe(200);
    expect(first.body.sessions.map((s: any) => s.id)).toEqual([ids[0], ids[2]]);
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const second = await t.rest('GET', `/v2/sessions?limit=2&cursor=${first.body.nextCursor}`, { key: dave.apiKey });
    expect(second.body).toMatchObject({ sessions: [expect.objectContaining({ id: ids[1] })], nextCursor: null });
    const person = (u: TestUser) => ({
      _id: u.id,
      userId: u.id,
      username: u.username,
      userImage: null,
      type: 'user',
      createdAt: isoDate,
      updatedAt: isoDate,
    });
    expect(second.body.sessions[0]).toEqual({
      _id: ids[1],
      id: ids[1],
      title: expect.any(String),
      scenario: null,
      status: 'active',
      owner: person(dave),
      agents: [
        {
          _id: muse.id,
          userId: muse.id,
          username: 'muse',
          userImage: null,
          type: 'agent',
          name: 'Muse',
          description: expect.any(String),
          createdAt: isoDate,
          updatedAt: isoDate,
        },
      ],
      agent_ids: [muse.id],
      users: [{ ...person(dave), user: dave.id, permission: 'owner' }],
      budget: {
        manna_budget: null,
        token_budget: null,
        turn_budget: null,
        manna_spent: 0,
        tokens_spent: expect.any(Number),
        turns_spent: 1,
      },
      spent: { manna: 0, tokens: expect.any(Number), turns: 1 },
      autonomy_settings: null,
      while_replying: 'enqueue',
      createdAt: isoDate,
      updatedAt: isoDate,
    });

    for (const [query, text] of [
      ['?limit=0', 'limit: must be at least 1'],
      ['?limit=101', 'limit: must be at most 100'],
      ['?limit=abc', 'limit: must be a number'],
      ['?cursor=not-a-cursor', 'Invalid cursor'],
      [`?cursor=${Buffer.from('ses:yesterday|x').toString('base64url')}`, 'Invalid cursor'],
    ]) {
      expect(await t.rest('GET', `/v2/sessions${query}`, { key: dave.apiKey })).toMatchObject({ status: 400, body: { message: text } });
    }
  });

  it('GET /v2/sessions/:id shows the latest messages and pages back and forth', async () => {
    const id = await newSession(t, alice, [muse.id], { content: 'm0' });
    await settledSession(t, alice, id);
    for (let i = 1; i < 4; i++) {
      await post(alice, { session_id: id, content: `m${i}` });
      await settledSession(t, alice, id);
    }
    // eden, then 4 prompts and 4 replies: 9 messages.
    const latest = await t.rest('GET', `/v2/sessions/${id}?limit=4`, { key: alice.apiKey });
    expect(latest.body.messages.map((m: any) => m.content)).toEqual(['m2', 'Hello from the model.', 'm3', 'Hello from the model.']);
    expect(latest.body.page).toMatchObject({ hasOlder: true, hasNewer: false });
    const older = await t.rest('GET', `/v2/sessions/${id}?limit=4&before=${latest.body.page.olderCursor}`, { key: alice.apiKey });
    expect(older.body.messages.map((m: any) => m.content)).toEqual(['m0', 'Hello from the model.', 'm1', 'Hello from the model.']);
    expect(older.body.page).toMatchObject({ hasOlder: true, hasNewer: true });
    const oldest = await t.rest('GET', `/v2/sessions/${id}?limit=4&before=${older.body.page.olderCursor}`, { key: alice.apiKey });
    expect(oldest.body.messages.map((m: any) => m.role)).toEqual(['eden']);
    expect(oldest.body.page.hasOlder).toBe(false);
    const newer = await t.rest('GET', `/v2/sessions/${id}?limit=2&after=${older.body.page.newerCursor}`, { key: alice.apiKey });
    expect(newer.body.messages.map((m: any) => m.content)).toEqual(['m2', 'Hello from the model.']);

    expect(await t.rest('GET', `/v2/sessions/${id}?before=garbage`, { key: alice.apiKey })).toMatchObject({
      status: 400,
      body: { message: 'Invalid cursor' },
    });
    expect(await t.rest('GET', `/v2/sessions/${id}?limit=500`, { key: alice.apiKey })).toMatchObject({
      status: 400,
      body: { message: /^limit: / },
    });
    expect(await t.rest('GET', `/v2/sessions/${id}`, { key: carol.apiKey })).toMatchObject({
      status: 403,
      body: { message: 'You do not have access to this session' },
    });
    expect(await t.rest('GET', '/v2/sessions/nothing-here', { key: alice.apiKey })).toMatchObject({
      status: 404,
      body: { message: 'Session not found' },
    });
  });
});

describe('POST /v2/sessions/react (operation 6)', () => {
  // How reactions toggle and exclude each other is the sessions' rule (test/rules/sessions.test.ts,
  // "reactions"); here, what REST answers to an added and a removed one, and the message showing them.
  it('toggles a reaction, answering whether it was added or removed, the message showing the reactions', async () => {
    const id = await newSession(t, alice, [muse.id]);
    const reply = (await settledSession(t, alice, id)).messages.at(-1);
    const react = (user: TestUser, reaction: string) =>
      t.rest('POST', '/v2/sessions/react', { key: user.apiKey, body: { message_id: reply.id, reaction } });
    const reactions = async () => (await settledSession(t, alice, id)).messages.at(-1).reactions;

    expect(await react(alice, 'thumbs_up')).toMatchObject({ status: 200, body: { success: true, message: 'Reaction added' } });
    expect(await reactions()).toEqual({ [alice.id]: ['thumbs_up'] });
    expect((await react(alice, '🔥')).body).toEqual({ success: true, message: 'Reaction added' });
    expect(await reactions()).toEqual({ [alice.id]: ['thumbs_up', '🔥'] });
    expect((await react(alice, 'thumbs_up')).body).toEqual({ success: true, message: 'Reaction removed' });
    expect(await reactions()).toEqual({ [alice.id]: ['🔥'] });
  });

  it('404 for an unknown message, 403 for a message you cannot see, 400 for missing fields', async () => {
    const id = await newSession(t, alice, [muse.id]);
    const reply = (await settledSession(t, alice, id)).messages.at(-1);
    expect(
      await t.rest('POST', '/v2/sessions/react', { key: alice.apiKey, body: { message_id: 'nope', reaction: 'thumbs_up' } }),
    ).toMatchObject({ status: 404, body: { message: 'Message not found' } });
    expect(
      await t.rest('POST', '/v2/sessions/react', { key: carol.apiKey, body: { message_id: reply.id, reaction: 'thumbs_up' } }),
    ).toMatchObject({
      status: 403,
      body: { message: 'You do not have access to this session' },
    });
    for (const [body, text] of [
      [{ reaction: 'thumbs_up' }, /^message_id: /],
      [{ message_id: reply.id }, /^reaction: /],
      [{ message_id: reply.id, reaction: '' }, 'reaction: must not be empty'],
      [{ message_id: reply.id, reaction: 'x'.repeat(33) }, 'reaction: must be at most 32 characters'],
    ] as const) {
      const res = await t.rest('POST', '/v2/sessions/react', { key: alice.apiKey, body });
      expect(res.status).toBe(400);
      expect(Object.keys(res.body)).toEqual(['message']);
      if (typeof text === 'string') expect(res.body.message).toBe(text);
      else expect(res.body.message).toMatch(text);
    }
    expect(await t.db.reaction.count({ where: { messageId: reply.id } })).toBe(0);
  });
});

describe('DELETE /v2/sessions/:id (operation 9)', () => {
  it('owners delete a session with its messages, reactions and shares; others get 401, unknown 404, with {error, message}', async () => {
    const id = await newSession(t, alice, [muse.id]);
    const reply = (await settledSession(t, alice, id)).messages.at(-1);
    await t.rest('POST', `/v2/sessions/${id}/users`, { key: alice.apiKey, body: { username: 'bob', permission: 'editor' } });
    await t.rest('POST', '/v2/sessions/react', { key: bob.apiKey, body: { message_id: reply.id, reaction: 'thumbs_up' } });
    const share = (await t.rest('POST', `/v2/sessions/${id}/share`, { key: alice.apiKey })).body.share.share_id;

    for (const user of [bob, carol]) {
      expect(await t.rest('DELETE', `/v2/sessions/${id}`, { key: user.apiKey })).toMatchObject({
        status: 401,
        body: { error: 'You are not allowed to delete this session', message: 'You are not allowed to delete this session' },
      });
    }
    expect(await t.rest('DELETE', '/v2/sessions/unknown-session', { key: alice.apiKey })).toMatchObject({
      status: 404,
      body: { error: 'Session not found', message: 'Session not found' },
    });
    expect(await t.rest('DELETE', `/v2/sessions/${id}`, { key: alice.apiKey })).toMatchObject({ status: 200, body: { success: true } });

    expect(await t.rest('GET', `/v2/sessions/${id}`, { key: alice.apiKey })).toMatchObject({ status: 404 });
    expect(await t.rest('GET', `/v2/sessions/share/${share}`)).toMatchObject({ status: 404 });
    expect(await t.db.message.count({ where: { sessionId: id } })).toBe(0);
    expect(await t.db.reaction.count({ where: { messageId: reply.id } })).toBe(0);
    expect(await t.db.sessionUser.count({ where: { sessionId: id } })).toBe(0);
    expect(await t.rest('DELETE', `/v2/sessions/${id}`, { key: alice.apiKey })).toMatchObject({ status: 404 });
  });
});

describe('sharing (operations 1 and 18)', () => {
  it('GET /v2/sessions/shared lists sessions others added you to, newest first', async () => {
    const erin = await t.createUser('erin');
    // Newest means latest activity, and a reply's end and the title named after it are activity:
    // the older session has both before the newer one starts, or under load they could come last.
    const older = await newSession(t, alice, [muse.id], { content: 'older' });
    await titledSession(t, alice, older);
    const newer = await newSession(t, bob, [remy.id], { content: 'newer' });
    await newSession(t, erin, [muse.id], { content: 'my own' });
    await t.rest('POST', `/v2/sessions/${older}/users`, { key: alice.apiKey, body: { username: 'erin', permission: 'editor' } });
    await settledSession(t, bob, newer);
    await t.rest('POST', `/v2/sessions/${newer}/users`, { key: bob.apiKey, body: { username: 'erin', permission: 'owner' } });
    const res = await t.rest('GET', '/v2/sessions/shared', { key: erin.apiKey });
    expect(res.status).toBe(200);
    expect(res.body.sharedSessions.map((s: any) => s.id)).toEqual([newer, older]);
    expect(res.body.sharedSessions[1].users).toEqual(
      expect.arrayContaining([expect.objectContaining({ _id: erin.id, username: 'erin', user: erin.id, permission: 'editor' })]),
    );
    expectAuthError(await t.rest('GET', '/v2/sessions/shared'));
    expectAuthError(await t.rest('GET', '/v2/sessions/shared', { key: 'garbage' }));
  });

  it('a share shows the session up to when it was made, without a key, and nothing private', async () => {
    const id = await newSession(t, alice, [muse.id], { content: 'Shared question', budget: { manna_budget: 500 } });
    await t.rest('POST', `/v2/sessions/${id}/users`, { key: alice.apiKey, body: { username: 'bob', permission: 'editor' } });
    await post(bob, { session_id: id, content: 'Bob adds an idea' });
    const before = await settledSession(t, alice, id);
    await t.rest('POST', '/v2/sessions/react', { key: bob.apiKey, body: { message_id: before.messages.at(-1).id, reaction: 'thumbs_up' } });

    expect(await t.rest('POST', `/v2/sessions/${id}/share`, { key: bob.apiKey })).toMatchObject({
      status: 403,
      body: { message: 'Only an owner of this session can share it' },
    });
    const made = await t.rest('POST', `/v2/sessions/${id}/share`, { key: alice.apiKey });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({
      success: true,
      share_id: made.body.share.share_id,
      share_url: `/sessions/share/${made.body.share.share_id}`,
    });
    await post(alice, { session_id: id, content: 'After the share' });
    await settledSession(t, alice, id);

    const res = await t.rest('GET', `/v2/sessions/share/${made.body.share.share_id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ share: made.body.share });
    const { share } = res.body;
    expect(share).toEqual({
      share_id: expect.any(String),
      title: expect.any(String),
      session: { _id: id, id, title: expect.any(String), createdAt: isoDate, agents: [{ key: 'muse', name: 'Muse', image: null }] },
      messages: expect.any(Array),
      owner: { username: 'alice', userImage: null },
      createdAt: isoDate,
    });
    expect(share.messages.map((m: any) => m.content)).toEqual([
      'Muse joined the session',
      'Shared question',
      'Hello from the model.',
      'Bob adds an idea',
      'Hello from the model.',
    ]);
    expect(share.messages.at(-1).reactions).toEqual([{ reaction: 'thumbs_up', count: 1 }]);
    expect(share.messages[3].sender).toEqual({ username: 'bob', userImage: null, type: 'user' });
    const text = JSON.stringify(res.body);
    for (const secret of [alice.id, bob.id, 'manna', 'budget', 'After the share', 'thought']) expect(text).not.toContain(secret);

    expect(await t.rest('GET', '/v2/sessions/share/does-not-exist')).toMatchObject({
      status: 404,
      body: { error: 'Shared session not found' },
    });
  });
});

describe('session users', () => {
  it('owners add users with a permission, change it and remove them; anyone may leave', async () => {
    const id = await newSession(t, alice, [muse.id]);
    const add = (by: TestUser, username: string, permission: string) =>
      t.rest('POST', `/v2/sessions/${id}/users`, { key: by.apiKey, body: { username, permission } });
    expect(await add(alice, 'bob', 'editor')).toMatchObject({ status: 200, body: { success: true, user: bob.id, permission: 'editor' } });
    expect(await add(bob, 'carol', 'editor')).toMatchObject({
      status: 403,
      body: { message: 'Only an owner of this session can add or remove users' },
    });
    expect(await add(alice, 'nobody-by-that-name', 'editor')).toMatchObject({ status: 404, body: { message: 'User not found' } });
    expect(await add(alice, 'muse', 'editor')).toMatchObject({ status: 404, body: { message: 'User not found' } });
    expect(await add(alice, 'alice', 'editor')).toMatchObject({ status: 400 });
    expect(await add(alice, 'carol', 'admin')).toMatchObject({ status: 400, body: { message: /^permission: / } });
    expect(await add(alice, 'bob', 'owner')).toMatchObject({ status: 200, body: { permission: 'owner' } });
    expect(await add(bob, 'carol', 'editor')).toMatchObject({ status: 200 });

    expect(await t.rest('DELETE', `/v2/sessions/${id}/users/${alice.id}`, { key: bob.apiKey })).toMatchObject({ status: 400 });
    expect(await t.rest('DELETE', `/v2/sessions/${id}/users/${carol.id}`, { key: carol.apiKey })).toMatchObject({
      status: 200,
      body: { success: true },
    });
    expect(await t.rest('GET', `/v2/sessions/${id}`, { key: carol.apiKey })).toMatchObject({ status: 403 });
    expect(await t.rest('DELETE', `/v2/sessions/${id}/users/${carol.id}`, { key: alice.apiKey })).toMatchObject({
      status: 404,
      body: { message: 'That user is not in this session' },
    });
    expect(await t.rest('DELETE', `/v2/sessions/${id}/users/${bob.id}`, { key: alice.apiKey })).toMatchObject({ status: 200 });
    expect((await t.rest('GET', `/v2/sessions/${id}`, { key: alice.apiKey })).body.session.users).toEqual([
      expect.objectContaining({ _id: alice.id, user: alice.id, permission: 'owner' }),
    ]);
  });
});

// Autonomous sessions over REST: the settings and their refusals, a loop of turns that stops at its
// budget and says so, a cancel that stops it, a person writing in between; and the token and manna
// budgets, each stop saying which budget, overspent by no more than the turn under way, the manna
// the owner's, each move a ledger row.
describe('autonomous sessions', () => {
  // Users of their own: the tests above count alice's sessions and what bob is let into.
  let alice: TestUser;
  let bob: TestUser;
  let agents: { id: string; name: string }[];
  /** Ada and Bo again, each given the paid tool. */
  let makers: { id: string }[];
  beforeAll(async () => {
    alice = await t.createUser('ava');
    bob = await t.createUser('ben');
    await t.services.manna.grant('ava', '400', 'forever');
    const f = fixtures(t);
    agents = [await f.agent(alice, { name: 'Ada' }), await f.agent(alice, { name: 'Bo' })];
    makers = [await f.agent(alice, { name: 'Ada', tools: { maker: true } }), await f.agent(alice, { name: 'Bo', tools: { maker: true } })];
  });
  beforeEach(() => llm.setDefault({ tokens: ['Well', ', ', 'indeed', '.'] }));

  const sessionCount = () => t.db.session.count({ where: { ownerId: alice.id } });
  const updates = (frames: SseFrame[], type: string) => frames.filter((f) => f.data?.data?.type === type).map((f) => f.data.data);

  /** A new session of Ada and Bo with this budget, watched from the start. */
  async function watchedSession(budget: Record<string, number>) {
    const res = await t.rest('POST', '/v2/sessions/create', { key: alice.apiKey, body: { agent_ids: agents.map((a) => a.id), budget } });
    expect(res.status).toBe(201);
    const sessionId = res.body.session.id as string;
    const stream = await openSse(`${t.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': alice.apiKey } });
    expect(stream.status).toBe(200);
    return { sessionId, stream };
  }
  const turnOn = (sessionId: string, interval: number) =>
    t.rest('PATCH', `/v2/sessions/${sessionId}`, { key: alice.apiKey, body: { autonomy_settings: on(interval) } });
  const stopped = (stream: SseClient) => stream.waitFor((f) => f.data?.data?.type === 'autonomy_stopped');

  describe('autonomy settings', () => {
    it('refuses auto-reply without a budget, in the original words, and creates nothing', async () => {
      const before = await sessionCount();
      for (const path of ['/v2/sessions', '/v2/sessions/create']) {
        const res = await t.rest('POST', path, {
          key: alice.apiKey,
          body: { agent_ids: [agents[0]!.id], content: 'Hello', autonomy_settings: on() },
        });
        expectError(res, 400, 'message', NEEDS_BUDGET);
      }
      expect(await sessionCount()).toBe(before);
    });

    // Which settings are refused is the sessions' rule (test/rules/sessions.test.ts, "what a prompt’s
    // input may be"); here, that REST names the nested field in its own spelling.
    it('names the field at fault in the nested settings', async () => {
      const res = await t.rest('POST', '/v2/sessions/create', {
        key: alice.apiKey,
        body: { agent_ids: [agents[0]!.id], budget: { turn_budget: 5 }, autonomy_settings: { ...on(), reply_interval: 3601 } },
      });
      expectError(res, 400, 'message', 'autonomy_settings.reply_interval: must be at most 3600');
    });

    it('are shown on the session, and changed by its owner alone with PATCH (which needs the budget too)', async () => {
      const created = await t.rest('POST', '/v2/sessions/create', {
        key: alice.apiKey,
        body: {
          agent_ids: [agents[0]!.id],
          autonomy_settings: { auto_reply: false, reply_interval: 30, actor_selection_method: 'random' },
        },
      });
      expect(created.status).toBe(201);
      const id = created.body.session.id as string;
      expect(created.body.session.autonomy_settings).toEqual({ auto_reply: false, reply_interval: 30, actor_selection_method: 'random' });
      // No budget on this session: turning auto-reply on is refused, and nothing changes.
      expectError(
        await t.rest('PATCH', `/v2/sessions/${id}`, { key: alice.apiKey, body: { autonomy_settings: on() } }),
        400,
        'error',
        NEEDS_BUDGET,
      );
      expectError(await t.rest('PATCH', `/v2/sessions/${id}`, { key: bob.apiKey, body: { autonomy_settings: on() } }), 404, 'error');
      const read = await t.rest('GET', `/v2/sessions/${id}`, { key: alice.apiKey });
      expect(read.body.session.autonomy_settings).toEqual({ auto_reply: false, reply_interval: 30, actor_selection_method: 'random' });
      const renamed = await t.rest('PATCH', `/v2/sessions/${id}`, {
        key: alice.apiKey,
        body: { autonomy_settings: { auto_reply: false, reply_interval: 5, actor_selection_method: 'random_exclude_last' } },
      });
      expect(renamed.body).toEqual({ success: true });
      const after = await t.rest('GET', `/v2/sessions/${id}`, { key: alice.apiKey });
      expect(after.body.session.autonomy_settings).toEqual({
        auto_reply: false,
        reply_interval: 5,
        actor_selection_method: 'random_exclude_last',
      });
      expect(after.body.session.title).toBeNull();
    });
  });

  describe('an autonomous session', () => {
    it('takes turns, the agents alternating, each a streamed reply to the conversation so far, until its turn budget stops it', async () => {
      const requestsBefore = llm.requests.length;
      const { sessionId, stream } = await watchedSession({ turn_budget: 4 });
      // A prompt that turns autonomy on as it is sent.
      const res = await t.rest('POST', '/v2/sessions', {
        key: alice.apiKey,
        body: { session_id: sessionId, content: 'Discuss the tides', autonomy_settings: on(0) },
      });
      expect(res.status).toBe(200);
      const stop = await stopped(stream);
      stream.close();
      expect(stop.data.data).toEqual({
        type: 'autonomy_stopped',
        session_id: sessionId,
        reason: 'turn_budget',
        detail: 'Session turn budget exceeded',
      });

      // The prompt took one turn (Ada answered it); three autonomous turns followed, no two by the same agent in a row.
      const turns = updates(stream.frames, 'autonomous_turn');
      expect(turns).toHaveLength(3);
      const read = await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey });
      const replies = read.body.messages.filter((m: { role: string }) => m.role === 'assistant');
      expect(replies.map((m: { status: string; content: string }) => [m.status, m.content])).toEqual(
        Array.from({ length: 4 }, () => ['complete', 'Well, indeed.']),
      );
      const speakers = replies.map((m: { sender_id: string }) => m.sender_id);
      for (let i = 1; i < speakers.length; i++) expect(speakers[i]).not.toBe(speakers[i - 1]);
      // Each turn streamed under its own id, and is its own prompt.
      for (const turn of turns) {
        expect(
          updates(stream.frames, 'assistant_token')
            .filter((e) => e.prompt_id === turn.prompt_id)
            .map((e) => e.text),
        ).toEqual(['Well', ', ', 'indeed', '.']);
        expect(turn.reply_id).toBe(turn.prompt_id);
        expect(replies.find((m: { id: string }) => m.id === turn.reply_id)).toMatchObject({
          prompt_id: turn.reply_id,
          sender_id: turn.agent,
        });
      }
      // A turn is asked with the conversation so far: the last one saw the prompt and the replies before it.
      const asked = llm.requests.slice(requestsBefore).filter((r) => r.body.messages.some((m) => m.content?.includes('Discuss the tides')));
      expect(asked.at(-1)!.body.messages.filter((m) => m.content?.includes('Well, indeed.'))).toHaveLength(3);
      expect(read.body.session.budget).toMatchObject({ turn_budget: 4, turns_spent: 4 });
      expect(read.body.session.autonomy_settings).toEqual({ ...on(0), auto_reply: false });
      expect(await t.services.jobs.waiting(TURN_QUEUE, sessionId)).toBe(false);
    });

    it('stops when its owner cancels, and says why', async () => {
      const { sessionId, stream } = await watchedSession({ turn_budget: 50 });
      expect((await turnOn(sessionId, 60)).status).toBe(200);
      // A new session with no message: an agent opens the conversation; the next turn waits 60 s.
      await stream.waitFor((f) => f.data?.data?.type === 'end_prompt');
      await until('the next turn to wait', () => t.services.jobs.waiting(TURN_QUEUE, sessionId));
      const cancel = await t.rest('POST', `/v2/sessions/${sessionId}/cancel`, { key: alice.apiKey, body: {} });
      expect(cancel.status).toBe(200);
      const stop = await stopped(stream);
      stream.close();
      expect(stop.data.data).toMatchObject({ reason: 'turned_off' });
      expect(await t.services.jobs.waiting(TURN_QUEUE, sessionId)).toBe(false);
      const read = await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey });
      expect(read.body.session.autonomy_settings.auto_reply).toBe(false);
      expect(read.body.session.budget.turns_spent).toBe(1);
    });

    it('lets a person write in between: the loop goes on from their message, never two replies at once', async () => {
      const { sessionId, stream } = await watchedSession({ turn_budget: 4 });
      expect((await turnOn(sessionId, 2)).status).toBe(200);
      await stream.waitFor((f) => f.data?.data?.type === 'end_prompt');
      const prompt = await t.rest('POST', '/v2/sessions', { key: alice.apiKey, body: { session_id: sessionId, content: 'And the moon?' } });
      expect(prompt.status).toBe(200);
      await stopped(stream);
      stream.close();
      // Replies never overlap: each starts after the one before it ended.
      const order = stream.frames
        .map((f) => f.data?.data)
        .filter((e) => e && ['start_prompt', 'autonomous_turn', 'end_prompt'].includes(e.type))
        .map((e) => e.type);
      expect(order.filter((type) => type !== 'end_prompt')).toHaveLength(4);
      expect(order).toEqual(order.map((_, i) => (i % 2 ? 'end_prompt' : expect.stringMatching(/^(start_prompt|autonomous_turn)$/))));
      expect(order.filter((type) => type === 'start_prompt')).toHaveLength(1);
      // The turn after the person's message was asked with it.
      const lastTurn = updates(stream.frames, 'autonomous_turn').at(-1)!;
      const turnRequest = llm.requests.findLast((r) => r.body.messages.some((m) => m.content?.includes('And the moon?')));
      expect(turnRequest).toBeDefined();
      const read = await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey });
      expect(read.body.messages.at(-1).id).toBe(lastTurn.reply_id);
      expect(read.body.session.budget.turns_spent).toBe(4);
    });
  });

  /** A new session of the makers with this budget, its loop turned on, run until it stops; the stop and the session as it ends. */
  async function runToStop(budget: Record<string, number>) {
    const created = await t.rest('POST', '/v2/sessions/create', {
      key: alice.apiKey,
      body: { agent_ids: makers.map((a) => a.id), budget },
    });
    expect(created.status).toBe(201);
    const sessionId = created.body.session.id as string;
    const stream = await openSse(`${t.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': alice.apiKey } });
    const on = await t.rest('PATCH', `/v2/sessions/${sessionId}`, {
      key: alice.apiKey,
      body: { autonomy_settings: { auto_reply: true, reply_interval: 0, actor_selection_method: 'random' } },
    });
    expect(on.status).toBe(200);
    const stop = await stream.waitFor((f) => f.data?.data?.type === 'autonomy_stopped');
    stream.close();
    const read = await t.rest('GET', `/v2/sessions/${sessionId}`, { key: alice.apiKey });
    const replies = read.body.messages.filter((m: { role: string }) => m.role === 'assistant');
    expect(await t.services.jobs.waiting(TURN_QUEUE, sessionId)).toBe(false);
    expect(read.body.session.autonomy_settings.auto_reply).toBe(false);
    return { sessionId, stop: stop.data.data, session: read.body.session, replies };
  }

  const balanceOf = async () => Number((await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).body.balance);

  describe('an autonomous loop and its budgets', () => {
    beforeEach(() => {
      llm.reset();
      svc.reset();
    });

    it('stops once its tokens are spent, overspent by no more than the last turn', async () => {
      const perTurn = { prompt_tokens: 300, completion_tokens: 100 };
      llm.setDefault({ tokens: ['Hm.'], usage: perTurn });
      const { stop, session, replies } = await runToStop({ token_budget: 1000, turn_budget: 20 });
      expect(stop).toMatchObject({ reason: 'token_budget', detail: 'Session token budget exceeded' });
      // 400 tokens a turn: after three turns 1,200 are spent, and no fourth starts.
      expect(replies.map((m: { status: string }) => m.status)).toEqual(['complete', 'complete', 'complete']);
      expect(session.budget).toMatchObject({ token_budget: 1000, tokens_spent: 1200, turns_spent: 3 });
      expect(session.budget.tokens_spent - session.budget.token_budget).toBeLessThan(perTurn.prompt_tokens + perTurn.completion_tokens);
    });

    it('stops once its manna is spent, paid by the owner, the ledger agreeing with the balance', async () => {
      // Each turn calls the tool once, then answers with what it made.
      let calls = 0;
      llm.choose((r) =>
        r.body.messages.at(-1)?.role === 'tool'
          ? { tokens: ['Made.'] }
          : { toolCalls: [{ id: `call_${++calls}`, name: 'maker', arguments: JSON.stringify({ prompt: 'a kite' }) }] },
      );
      const before = await balanceOf();
      const ledgerBefore = await t.db.mannaLedger.count({ where: { userId: alice.id } });
      const { sessionId, stop, session, replies } = await runToStop({ manna_budget: 100, turn_budget: 20 });
      expect(stop).toMatchObject({ reason: 'manna_budget', detail: 'Session manna budget exceeded' });
      // 50 manna a turn: the second turn's tool spends the budget exactly, so the model's call after
      // it is refused (that reply fails on the budget, as any reply does) and no third turn starts.
      expect(replies.map((m: { status: string; content: string; error: string | null }) => [m.status, m.content, m.error])).toEqual([
        ['complete', 'Made.', null],
        ['failed', '', 'Session manna budget exceeded'],
      ]);
      expect(svc.calls).toHaveLength(2);
      expect(session.budget).toMatchObject({ manna_budget: 100, manna_spent: 100 });
      expect(await balanceOf()).toBe(before - 2 * MAKER_COST);
      const rows = await t.db.mannaLedger.findMany({ where: { userId: alice.id }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
      const moved = rows.slice(ledgerBefore);
      expect(moved.every((row) => row.sessionId === sessionId)).toBe(true);
      expect(moved.reduce((sum, row) => sum + row.amount.toNumber(), 0)).toBe(-2 * MAKER_COST);
      expect(rows.at(-1)!.balanceAfter.toNumber()).toBe(before - 2 * MAKER_COST);
    });
  });
});
