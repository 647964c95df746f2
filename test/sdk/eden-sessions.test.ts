import { EdenClient } from '@edenlabs/eden-sdk';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { isoDate } from '../helpers/rest-helpers.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * The original's v2 session routes, which the published SDK (0.4.6) has no named methods for:
 * called through the SDK's own `apiCall` (its axios, base URL and X-Api-Key), as an
 * integration on that SDK would, and checked against the documents the original's clients read
 * (shared/research/eden-semantics.md, "Documents as the original's clients read them").
 */
describe("the original's session routes through the SDK's client (@edenlabs/eden-sdk)", () => {
  let t: TestApp;
  let alice: TestUser;
  let bob: TestUser;
  let agent: { id: string };
  let sdk: EdenClient;
  let bobSdk: EdenClient;

  setUp(async (start) => {
    t = await start.app();
    const f = fixtures(t);
    alice = await t.createUser('alice');
    bob = await t.createUser('bob');
    agent = await f.agent(alice, { name: 'Muse', key: 'muse', description: 'An art director', image: 'https://cdn.example.com/muse.png' });
    sdk = new EdenClient({ edenApiUrl: t.url, apiKey: alice.apiKey });
    bobSdk = new EdenClient({ edenApiUrl: t.url, apiKey: bob.apiKey });
  });

  const call = (client: EdenClient, method: string, url: string, data?: unknown) =>
    client.apiCall(() => ({ method, url, ...(data === undefined ? {} : { data }) })) as Promise<Record<string, any>>;
  const failure = async (request: Promise<unknown>) => {
    const error = (await request.then(
      () => expect.fail('the call should have failed'),
      (e: unknown) => e,
    )) as { isAxiosError?: boolean; response: { status: number; data: Record<string, unknown> } };
    expect(error.isAxiosError).toBe(true);
    return { status: error.response.status, body: error.response.data };
  };

  /** A populated reference as the original's documents carry it. */
  const ref = (id: string, username: string) =>
    expect.objectContaining({ _id: id, username, userImage: expect.toBeOneOf([expect.any(String), null]) });

  /** The session document the original's clients read. */
  function expectSessionDocument(session: Record<string, any>, id: string) {
    expect(session).toMatchObject({
      _id: id,
      owner: expect.objectContaining({ _id: alice.id, userId: alice.id, username: 'alice' }),
      agents: [
        expect.objectContaining({
          _id: agent.id,
          username: 'muse',
          userImage: 'https://cdn.example.com/muse.png',
          name: 'Muse',
          description: 'An art director',
        }),
      ],
      users: expect.arrayContaining([ref(alice.id, 'alice')]),
      status: 'active',
      budget: {
        token_budget: null,
        manna_budget: null,
        turn_budget: null,
        tokens_spent: expect.any(Number),
        manna_spent: expect.any(Number),
        turns_spent: expect.any(Number),
      },
      createdAt: isoDate,
      updatedAt: isoDate,
    });
  }

  it('POST v2/sessions/create starts a session without a message: {success, session} populated', async () => {
    const res = await call(sdk, 'POST', 'v2/sessions/create', { agent_ids: [agent.id], title: 'Zine planning' });
    expect(res.success).toBe(true);
    expectSessionDocument(res.session, res.session._id);
    expect(res.session.title).toBe('Zine planning');
    const refused = await failure(call(sdk, 'POST', 'v2/sessions/create', { agent_ids: [] }));
    expect(refused).toEqual({ status: 400, body: { message: 'agent_ids must be provided when creating a new session' } });
  });

  it('a conversation: operation 4 answers {session_id, message_id}; GET v2/sessions/{id} gives {session} with its messages', async () => {
    const created = await call(sdk, 'POST', 'v2/sessions/create', { agent_ids: [agent.id] });
    const sessionId = created.session._id;
    const sent = await call(sdk, 'POST', 'v2/sessions', { session_id: sessionId, content: 'Plan a zine cover' });
    expect(sent).toMatchObject({ session_id: sessionId, message_id: expect.any(String) });
    await settledSession(t, alice, sessionId);

    const { session } = await call(sdk, 'GET', `v2/sessions/${sessionId}`);
    expectSessionDocument(session, sessionId);
    const prompt = session.messages.find((m: any) => m._id === sent.message_id);
    expect(prompt).toMatchObject({
      _id: sent.message_id,
      role: 'user',
      content: 'Plan a zine cover',
      attachments: [],
      tool_calls: [],
      reactions: {},
      createdAt: isoDate,
    });
    const reply = session.messages.at(-1);
    expect(reply).toMatchObject({ _id: expect.any(String), role: 'assistant', content: expect.any(String) });

    // The reactions the SDK names, stored per user.
    for (const reaction of ['thumbs_up', 'pin']) {
      expect(await call(sdk, 'POST', 'v2/sessions/react', { message_id: reply._id, reaction })).toMatchObject({ success: true });
    }
    const again = await call(sdk, 'GET', `v2/sessions/${sessionId}`);
    expect(again.session.messages.at(-1).reactions).toEqual({ [alice.id]: ['thumbs_up', 'pin'] });

    expect(await failure(call(bobSdk, 'GET', `v2/sessions/${sessionId}`))).toEqual({
      status: 403,
      body: { message: 'You do not have access to this session' },
    });
    expect(await failure(call(sdk, 'GET', 'v2/sessions/5f1e2d3c4b5a697887766554'))).toEqual({
      status: 404,
      body: { message: 'Session not found' },
    });
  });

  it('GET v2/sessions is a paginate-plugin page of my sessions, filtered by agent username', async () => {
    const carol = await t.createUser('carol');
    const carolSdk = new EdenClient({ edenApiUrl: t.url, apiKey: carol.apiKey });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await call(carolSdk, 'POST', 'v2/sessions/create', { agent_ids: [agent.id], title: `s${i}` })).session._id);
    const first = await call(carolSdk, 'GET', 'v2/sessions?limit=2&page=1');
    expect(first).toMatchObject({
      total: 3,
      limit: 2,
      page: 1,
      pages: 2,
      pagingCounter: 1,
      hasPrevPage: false,
      hasNextPage: true,
      prevPage: null,
      nextPage: 2,
    });
    expect(first.docs.map((s: any) => s._id)).toEqual([ids[2], ids[1]]);
    const second = await call(carolSdk, 'GET', 'v2/sessions?limit=2&page=2');
    expect(second.docs.map((s: any) => s._id)).toEqual([ids[0]]);
    expect(second).toMatchObject({ hasNextPage: false, nextPage: null, prevPage: 1 });
    expect((await call(carolSdk, 'GET', 'v2/sessions?agent_id=muse')).total).toBe(3);
    expect(await failure(call(carolSdk, 'GET', 'v2/sessions?agent_id=nobody'))).toEqual({
      status: 404,
      body: { message: 'Agent not found' },
    });
    // The default page holds 25.
    expect((await call(carolSdk, 'GET', 'v2/sessions')).limit).toBe(25);
  });

  it('PATCH v2/sessions/{id} renames (owner only), POST .../cancel sends the cancel signal', async () => {
    const { session } = await call(sdk, 'POST', 'v2/sessions/create', { agent_ids: [agent.id] });
    expect(await call(sdk, 'PATCH', `v2/sessions/${session._id}`, { title: 'Renamed' })).toMatchObject({ success: true });
    expect((await call(sdk, 'GET', `v2/sessions/${session._id}`)).session.title).toBe('Renamed');
    expect(await failure(call(sdk, 'PATCH', `v2/sessions/${session._id}`, {}))).toEqual({
      status: 400,
      body: { error: 'Title not provided' },
    });
    await call(sdk, 'POST', `v2/sessions/${session._id}/users`, { username: 'bob', permission: 'editor' });
    const notOwner = await failure(call(bobSdk, 'PATCH', `v2/sessions/${session._id}`, { title: 'Mine' }));
    expect(notOwner.status).toBe(401);
    expect(typeof notOwner.body.error).toBe('string');
    expect((await call(sdk, 'GET', `v2/sessions/${session._id}`)).session.title).toBe('Renamed');

    expect(await call(sdk, 'POST', `v2/sessions/${session._id}/cancel`, {})).toMatchObject({
      status: 'cancel_signal_sent',
      session_id: session._id,
    });
  });

  it('POST v2/sessions/{id}/share shares up to a message; anyone reads it; DELETE v2/sessions/share/{id} takes it down', async () => {
    const { session } = await call(sdk, 'POST', 'v2/sessions/create', { agent_ids: [agent.id] });
    const first = await call(sdk, 'POST', 'v2/sessions', { session_id: session._id, content: 'First thought' });
    await settledSession(t, alice, session._id);
    await call(sdk, 'POST', 'v2/sessions', { session_id: session._id, content: 'Second thought' });
    await settledSession(t, alice, session._id);

    const made = await call(sdk, 'POST', `v2/sessions/${session._id}/share`, { message_id: first.message_id, title: 'Just the start' });
    expect(made).toMatchObject({ success: true, share_id: expect.any(String), share_url: `/sessions/share/${made.share_id}` });
    const anonymous = new EdenClient({ edenApiUrl: t.url });
    const { share } = await call(anonymous, 'GET', `v2/sessions/share/${made.share_id}`);
    expect(share).toMatchObject({ share_id: made.share_id, title: 'Just the start', session: { _id: session._id } });
    expect(share.messages.map((m: any) => m.content).slice(-1)).toEqual(['First thought']);
    expect(share.messages.every((m: any) => typeof m._id === 'string')).toBe(true);

    expect(await failure(call(sdk, 'POST', `v2/sessions/${session._id}/share`, { message_id: 'nope' }))).toMatchObject({
      status: 404,
      body: { error: 'Message not found in this session' },
    });
    expect(await failure(call(bobSdk, 'DELETE', `v2/sessions/share/${made.share_id}`))).toMatchObject({ status: 403 });
    expect(await call(sdk, 'DELETE', `v2/sessions/share/${made.share_id}`)).toMatchObject({ success: true });
    expect(await failure(call(anonymous, 'GET', `v2/sessions/share/${made.share_id}`))).toEqual({
      status: 404,
      body: { error: 'Shared session not found' },
    });
    expect(await failure(call(sdk, 'DELETE', `v2/sessions/share/${made.share_id}`))).toEqual({
      status: 404,
      body: { error: 'Share not found' },
    });
  });
});
