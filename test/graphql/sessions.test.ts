import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { settledSession, titledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { until } from '../helpers/until.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';

const Send = graphql(`
  mutation Send($input: SendMessageInput!) {
    sendMessage(input: $input) { promptId replyIds seq session { id rawId title agents { key } myPermission } }
  }
`);
const SessionPage = graphql(`
  query SessionPage($id: ID!, $first: Int, $after: String, $last: Int, $before: String) {
    session(id: $id) {
      id
      title
      status
      owner { username }
      agents { key name }
      users { permission user { username } }
      myPermission
      budget { manna tokens turns }
      spent { manna tokens turns }
      messages(first: $first, after: $after, last: $last, before: $before) {
        edges { cursor node { id role status content thought error promptId sender { username } agent { key } usage { promptTokens completionTokens } reactions { reaction count reactedByMe } createdAt } }
        pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
      }
    }
  }
`);
const MySessions = graphql(`
  query MySessions($first: Int, $after: String) {
    sessions(first: $first, after: $after) {
      edges { cursor node { id title owner { username } agents { key } } }
      pageInfo { hasNextPage endCursor }
    }
  }
`);
const Shared = graphql(`
  query Shared {
    sharedSessions(first: 10) { edges { node { id myPermission owner { username } } } }
  }
`);
const React = graphql(`
  mutation React($messageId: ID!, $reaction: String!) {
    reactToMessage(messageId: $messageId, reaction: $reaction) { added messageId reactions { reaction count reactedByMe } }
  }
`);
const ShareIt = graphql(`
  mutation ShareIt($id: ID!) {
    shareSession(id: $id) { shareId title sessionId owner { username userImage type } agents { key name } messages { role content sender { username type } reactions { reaction count } } }
  }
`);
const ReadShare = graphql(`
  query ReadShare($shareId: ID!) {
    share(shareId: $shareId) { shareId title messages { role content } }
  }
`);
const AddUser = graphql(`
  mutation AddUser($sessionId: ID!, $username: String!, $permission: SessionPermission!) {
    addSessionUser(sessionId: $sessionId, username: $username, permission: $permission) { id users { permission user { username } } }
  }
`);
const RemoveUser = graphql(`
  mutation RemoveUser($sessionId: ID!, $userId: ID!) {
    removeSessionUser(sessionId: $sessionId, userId: $userId)
  }
`);
const DeleteSession = graphql(`
  mutation DeleteSession($id: ID!) {
    deleteSession(id: $id)
  }
`);
const DeleteKey = graphql(`
  mutation DeleteKeyForSessions($apiKey: String!) {
    deleteApiKey(apiKey: $apiKey)
  }
`);
const Events = graphql(`
  subscription Events($sessionId: ID!, $after: Seq) {
    sessionEvents(sessionId: $sessionId, after: $after) {
      __typename
      seq
      sessionId
      type
      ... on PromptStarted { promptId message { id content role } replyIds }
      ... on AssistantToken { messageId agentId text }
      ... on AssistantMessage { message { id content status agent { key } } }
      ... on ReplyFailed { error message { status content } }
      ... on PromptEnded { promptId }
      ... on ReactionsChanged { messageId userId userReactions counts { reaction count } }
      ... on SessionUpdated { title }
      ... on SessionUserRemoved { userId }
    }
  }
`);
const SendAndStream = graphql(`
  subscription SendAndStream($input: SendMessageInput!) {
    sendMessage(input: $input) {
      __typename
      seq
      type
      ... on PromptStarted { promptId message { content } }
      ... on AssistantToken { text messageId }
      ... on AssistantMessage { message { id content sender { username } } }
      ... on PromptEnded { promptId }
    }
  }
`);

const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

// Autonomous sessions: the settings on sendMessage and updateSession (and their refusal without
// a budget), shown on Session; each turn and the stop seen in sessionEvents.
const SendAutonomous = graphql(`
  mutation SendAutonomous($input: SendMessageInput!) {
    sendMessage(input: $input) { seq session { rawId autonomySettings { autoReply replyInterval actorSelectionMethod } } }
  }
`);
const UpdateSession = graphql(`
  mutation UpdateSession($id: ID!, $input: UpdateSessionInput!) {
    updateSession(id: $id, input: $input) { rawId title autonomySettings { autoReply replyInterval actorSelectionMethod } }
  }
`);
const AutonomyEvents = graphql(`
  subscription AutonomyEvents($sessionId: ID!, $after: Seq) {
    sessionEvents(sessionId: $sessionId, after: $after) {
      __typename
      seq
      ... on AutonomousTurnStarted { promptId replyId agentId }
      ... on AssistantMessage { promptId message { content } }
      ... on AutonomyStopped { reason detail }
    }
  }
`);

let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let bob: TestUser;
let carol: TestUser;
let muse: { id: string };
const ws = graphqlWsClients(() => t.url);

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Hi', ' from', ' Muse'], usage: { prompt_tokens: 20, completion_tokens: 3 } });
  // The slow-client test replays a reply of 600 tokens of 16 KB (about 20 MB of events with its
  // final message): more than the replay log keeps by default (EVENT_REPLAY_BYTES).
  t = await start.app({
    llm: { baseUrl: llm.baseUrl },
    events: { slowClientMs: 500, replayBytes: 64 * 1024 * 1024 },
    jobs: { pollMs: 500, superviseS: 1 },
  });
  [alice, bob, carol] = [await t.createUser('alice'), await t.createUser('bob'), await t.createUser('carol')];
  muse = await fixtures(t).agent(alice, { name: 'Muse', key: 'muse' });
});
beforeEach(() => llm.reset());
afterEach(() => ws.disposeAll());
afterAll(async () => {
  await ws.disposeAll();
});

async function startSession(user: TestUser, input: Record<string, unknown> = {}) {
  const data = expectData(await t.gql(Send, { input: { agentIds: [muse.id], content: 'Hello Muse', ...input } }, user.apiKey));
  return data.sendMessage;
}

describe('queries and mutations', () => {
  it('sendMessage returns at once; the session reads with its messages, paged both ways', async () => {
    const sent = await startSession(alice, { budget: { turnBudget: 10 } });
    expect(sent).toMatchObject({
      promptId: expect.any(String),
      replyIds: [expect.any(String)],
      seq: expect.any(Number),
      session: { agents: [{ key: 'muse' }], myPermission: 'OWNER' },
    });
    const id = sent.session.id;
    // REST, which the helper reads through, knows the session by its raw id.
    await settledSession(t, alice, sent.session.rawId);
    const data = expectData(await t.gql(SessionPage, { id }, alice.apiKey)).session;
    expect(data).toMatchObject({
      owner: { username: 'alice' },
      status: 'ACTIVE',
      budget: { manna: null, tokens: null, turns: 10 },
      spent: { manna: 0, tokens: 23, turns: 1 },
    });
    expect(data.users).toEqual([{ permission: 'OWNER', user: { username: 'alice' } }]);
    const nodes = data.messages.edges.map((e) => e.node);
    expect(nodes.map((n) => [n.role, n.content, n.status])).toEqual([
      ['EDEN', 'Muse joined the session', 'COMPLETE'],
      ['USER', 'Hello Muse', 'COMPLETE'],
      ['ASSISTANT', 'Hi from Muse', 'COMPLETE'],
    ]);
    expect(nodes[1]).toMatchObject({ id: sent.promptId, sender: { username: 'alice' }, agent: null });
    expect(nodes[2]).toMatchObject({
      id: sent.replyIds[0],
      promptId: sent.promptId,
      sender: { username: 'muse' },
      agent: { key: 'muse' },
      usage: { promptTokens: 20, completionTokens: 3 },
      thought: null,
      error: null,
    });

    const firstTwo = expectData(await t.gql(SessionPage, { id, first: 2 }, alice.apiKey)).session.messages;
    expect(firstTwo.edges.map((e) => e.node.role)).toEqual(['EDEN', 'USER']);
    expect(firstTwo.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    const rest = expectData(await t.gql(SessionPage, { id, first: 2, after: firstTwo.pageInfo.endCursor }, alice.apiKey)).session.messages;
    expect(rest.edges.map((e) => e.node.role)).toEqual(['ASSISTANT']);
    expect(rest.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    const lastOne = expectData(await t.gql(SessionPage, { id, last: 1 }, alice.apiKey)).session.messages;
    expect(lastOne.edges.map((e) => e.node.role)).toEqual(['ASSISTANT']);
    const before = expectData(await t.gql(SessionPage, { id, last: 5, before: lastOne.pageInfo.startCursor }, alice.apiKey)).session
      .messages;
    expect(before.edges.map((e) => e.node.role)).toEqual(['EDEN', 'USER']);

    for (const args of [{ after: 'bogus' }, { first: -1 }, { first: 1000 }]) {
      const refused = await t.gql(SessionPage, { id, ...(args as { first?: number; after?: string }) }, alice.apiKey);
      expect(expectGraphQLError(refused, 'BAD_USER_INPUT').message).toMatch(/Invalid cursor|must be a whole number from 0 to 200/);
    }
  });

  it('refuses bad input with BAD_USER_INPUT naming the field, and nothing is created', async () => {
    const before = await t.db.session.count();
    const noAgents = await t.gql(Send, { input: { content: 'hi' } }, alice.apiKey);
    expect(expectGraphQLError(noAgents, 'BAD_USER_INPUT').message).toBe('agent_ids must be provided when creating a new session');
    const budget = await t.gql(Send, { input: { agentIds: [muse.id], content: 'hi', budget: { turnBudget: 5000 } } }, alice.apiKey);
    const error = expectGraphQLError(budget, 'BAD_USER_INPUT');
    expect(error.message).toBe('budget.turnBudget: must be at most 1000');
    expect(error.extensions?.field).toBe('budget.turnBudget');
    expect(await t.db.session.count()).toBe(before);
  });

  it('a stranger gets FORBIDDEN, an unknown id NOT_FOUND, and no key UNAUTHENTICATED', async () => {
    const { session } = await startSession(alice);
    expectGraphQLError(await t.gql(SessionPage, { id: session.id }, carol.apiKey), 'FORBIDDEN');
    expectGraphQLError(await t.gql(SessionPage, { id: 'nope' }, alice.apiKey), 'NOT_FOUND');
    expectGraphQLError(await t.gql(SessionPage, { id: session.id }), 'UNAUTHENTICATED');
    expectGraphQLError(await t.gql(Send, { input: { sessionId: session.id, content: 'intrude' } }, carol.apiKey), 'FORBIDDEN');
  });

  it('sessions and sharedSessions page through your sessions and those shared with you', async () => {
    const dana = await t.createUser('dana');
    // Each session's activity (its reply, then its title) is over before the next one starts, so
    // newest activity first is the reverse of the order they were started in.
    const started = [];
    for (let i = 0; i < 3; i++) {
      const { session } = await startSession(dana);
      await titledSession(t, dana, session.rawId);
      started.push(session);
    }
    const ids = started.map((session) => session.id);
    const page1 = expectData(await t.gql(MySessions, { first: 2 }, dana.apiKey)).sessions;
    expect(page1.edges.map((e) => e.node.id)).toEqual([ids[2], ids[1]]);
    expect(page1.pageInfo.hasNextPage).toBe(true);
    const page2 = expectData(await t.gql(MySessions, { first: 2, after: page1.pageInfo.endCursor }, dana.apiKey)).sessions;
    expect(page2.edges.map((e) => e.node.id)).toEqual([ids[0]]);
    expect(page2.pageInfo.hasNextPage).toBe(false);
    expectGraphQLError(await t.gql(MySessions, { after: 'R1BDOk46MQ' }, dana.apiKey), 'BAD_USER_INPUT');

    expectData(await t.gql(AddUser, { sessionId: ids[0]!, username: 'carol', permission: 'EDITOR' }, dana.apiKey));
    const shared = expectData(await t.gql(Shared, {}, carol.apiKey)).sharedSessions.edges.map((e) => e.node);
    expect(shared).toContainEqual({ id: ids[0], myPermission: 'EDITOR', owner: { username: 'dana' } });
  });

  it('reactToMessage toggles, with thumbs up and down excluding each other', async () => {
    const { session, replyIds } = await startSession(alice);
    await settledSession(t, alice, session.rawId);
    const react = async (reaction: string, user = alice) =>
      expectData(await t.gql(React, { messageId: replyIds[0]!, reaction }, user.apiKey)).reactToMessage;
    expect(await react('thumbs_up')).toEqual({
      added: true,
      messageId: replyIds[0],
      reactions: [{ reaction: 'thumbs_up', count: 1, reactedByMe: true }],
    });
    expect((await react('thumbs_down')).reactions).toEqual([{ reaction: 'thumbs_down', count: 1, reactedByMe: true }]);
    expect(await react('thumbs_down')).toMatchObject({ added: false, reactions: [] });
    expectGraphQLError(await t.gql(React, { messageId: replyIds[0]!, reaction: 'pin' }, carol.apiKey), 'FORBIDDEN');
    expectGraphQLError(await t.gql(React, { messageId: 'missing', reaction: 'pin' }, alice.apiKey), 'NOT_FOUND');
  });

  it('shareSession freezes the session; share(shareId) reads it without a key and shows nothing private', async () => {
    const { session } = await startSession(alice, { content: 'Share this' });
    await settledSession(t, alice, session.rawId);
    expectGraphQLError(await t.gql(ShareIt, { id: session.id }, carol.apiKey), 'FORBIDDEN');
    const share = expectData(await t.gql(ShareIt, { id: session.id }, alice.apiKey)).shareSession;
    expect(share).toMatchObject({
      sessionId: session.id,
      owner: { username: 'alice', userImage: null, type: 'USER' },
      agents: [{ key: 'muse', name: 'Muse' }],
    });
    expect(share.messages.map((m) => [m.role, m.content, m.sender?.username ?? null])).toEqual([
      ['EDEN', 'Muse joined the session', null],
      ['USER', 'Share this', 'alice'],
      ['ASSISTANT', 'Hi from Muse', 'muse'],
    ]);
    await t.gql(Send, { input: { sessionId: session.id, content: 'later, private' } }, alice.apiKey);
    await settledSession(t, alice, session.rawId);
    const read = expectData(await t.gql(ReadShare, { shareId: share.shareId })).share;
    expect(read.messages.map((m) => m.content)).not.toContain('later, private');
    expectGraphQLError(await t.gql(ReadShare, { shareId: 'nothing' }), 'NOT_FOUND');
  });

  it('owners add and remove users; others may only leave', async () => {
    const { session } = await startSession(alice);
    const added = expectData(
      await t.gql(AddUser, { sessionId: session.id, username: 'bob', permission: 'EDITOR' }, alice.apiKey),
    ).addSessionUser;
    expect(added.users.map((u) => [u.user.username, u.permission])).toEqual([
      ['alice', 'OWNER'],
      ['bob', 'EDITOR'],
    ]);
    expectGraphQLError(await t.gql(AddUser, { sessionId: session.id, username: 'carol', permission: 'EDITOR' }, bob.apiKey), 'FORBIDDEN');
    expectGraphQLError(await t.gql(AddUser, { sessionId: session.id, username: 'ghost', permission: 'EDITOR' }, alice.apiKey), 'NOT_FOUND');
    expect(expectData(await t.gql(RemoveUser, { sessionId: session.id, userId: bob.id }, bob.apiKey)).removeSessionUser).toBe(true);
    expectGraphQLError(await t.gql(SessionPage, { id: session.id }, bob.apiKey), 'FORBIDDEN');
  });

  it('deleteSession: owners only; the session is gone', async () => {
    const { session } = await startSession(alice);
    await settledSession(t, alice, session.rawId);
    expectGraphQLError(await t.gql(DeleteSession, { id: session.id }, carol.apiKey), 'FORBIDDEN');
    expect(expectData(await t.gql(DeleteSession, { id: session.id }, alice.apiKey)).deleteSession).toBe(true);
    expectGraphQLError(await t.gql(SessionPage, { id: session.id }, alice.apiKey), 'NOT_FOUND');
  });

  it('a page of sessions with their agents, owners and users costs the same statements for 2 as for 20', async () => {
    const erin = await t.createUser('erin');
    for (let i = 0; i < 20; i++) await startSession(erin, { content: undefined });
    const Page = graphql(`
      query SessionsWithRelations($first: Int!) {
        sessions(first: $first) { edges { node { id owner { username } agents { key owner { username } } users { user { username } } myPermission } } }
      }
    `);
    // The fewest of three tries: work an earlier test left running (a title, a memory) may write
    // inside one window, while a statement per row would show in every try.
    const count = (first: number) => t.countQueries(async () => expectData(await t.gql(Page, { first }, erin.apiKey)));
    expect(await count(20)).toBe(await count(2));
  });
});

describe('subscriptions over graphql-ws', () => {
  it('Subscription.sendMessage sends and streams typed events from PromptStarted to PromptEnded', async () => {
    const sub = wsSubscribe(ws.connect(alice.apiKey), SendAndStream, { input: { agentIds: [muse.id], content: 'Stream it' } });
    const results = await sub.ended;
    const events = results.map((r) => r.data!.sendMessage);
    expect(events.map((e) => e.__typename)).toEqual([
      'PromptStarted',
      'AssistantToken',
      'AssistantToken',
      'AssistantToken',
      'AssistantMessage',
      'PromptEnded',
    ]);
    expect(events.map((e) => e.type)).toEqual([
      'start_prompt',
      'assistant_token',
      'assistant_token',
      'assistant_token',
      'assistant_message',
      'end_prompt',
    ]);
    const tokens = events.flatMap((e) => (e.__typename === 'AssistantToken' ? [e.text] : []));
    const message = events.find((e) => e.__typename === 'AssistantMessage');
    expect(message).toMatchObject({ message: { content: 'Hi from Muse', sender: { username: 'muse' } } });
    expect(tokens.join('')).toBe('Hi from Muse');
    for (let i = 1; i < events.length; i++) expect(events[i]!.seq).toBe(events[i - 1]!.seq + 1);
  });

  it('sessionEvents lets another device watch; with after it resumes mid-reply without loss or duplicates', async () => {
    const { session } = await startSession(alice);
    await settledSession(t, alice, session.rawId);
    const release = deferred();
    llm.enqueue({ tokens: ['o', 'n', 'e', ' ', 't', 'w', 'o'], gate: (i) => (i === 3 ? release.promise : undefined) });

    const phone = ws.connect(alice.apiKey);
    const first = wsSubscribe(phone, Events, { sessionId: session.id });
    await expect.poll(() => t.services.bus.subscriberCount()).toBe(1);
    expectData(await t.gql(Send, { input: { sessionId: session.id, content: 'count letters' } }, alice.apiKey));
    await first.waitFor((r) => r.data?.sessionEvents.__typename === 'AssistantToken' && r.data.sessionEvents.text === 'e');
    first.unsubscribe();
    const seen = first.results.map((r) => r.data!.sessionEvents);

    const laptop = wsSubscribe(ws.connect(alice.apiKey), Events, { sessionId: session.id, after: seen.at(-1)!.seq });
    release.resolve();
    await laptop.waitFor((r) => r.data?.sessionEvents.__typename === 'PromptEnded');
    laptop.unsubscribe();
    const all = [...seen, ...laptop.results.map((r) => r.data!.sessionEvents)];
    const seqs = all.map((e) => e.seq);
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBe(seqs[i - 1]! + 1);
    const text = all.flatMap((e) => (e.__typename === 'AssistantToken' ? [e.text] : [])).join('');
    expect(text).toBe('one two');
    expect(all.find((e) => e.__typename === 'AssistantMessage')).toMatchObject({
      message: { content: 'one two', status: 'COMPLETE', agent: { key: 'muse' } },
    });
  });

  it('a stranger subscribing gets FORBIDDEN; an expired resume point gets EVENTS_EXPIRED', async () => {
    const { session } = await startSession(alice);
    const stranger = wsSubscribe(ws.connect(carol.apiKey), Events, { sessionId: session.id });
    const [refused] = await stranger.ended;
    expect(refused!.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const stale = wsSubscribe(ws.connect(alice.apiKey), Events, { sessionId: session.id, after: 5 });
    const [expired] = await stale.ended;
    expect(expired!.errors?.[0]).toMatchObject({
      message: expect.stringContaining('no longer available'),
      extensions: { code: 'EVENTS_EXPIRED' },
    });
  });

  it('deleting the session ends its subscriptions with SESSION_DELETED; removing a user ends theirs with FORBIDDEN', async () => {
    // Titled from the start: no title is generated after the first reply, to arrive on these subscriptions.
    const { session } = await startSession(alice, { title: 'Short-lived' });
    await settledSession(t, alice, session.rawId);
    expectData(await t.gql(AddUser, { sessionId: session.id, username: 'bob', permission: 'EDITOR' }, alice.apiKey));
    const bobs = wsSubscribe(ws.connect(bob.apiKey), Events, { sessionId: session.id });
    const alices = wsSubscribe(ws.connect(alice.apiKey), Events, { sessionId: session.id });
    await expect.poll(() => t.services.bus.subscriberCount()).toBeGreaterThanOrEqual(2);

    expectData(await t.gql(RemoveUser, { sessionId: session.id, userId: bob.id }, alice.apiKey));
    const bobResults = await bobs.ended;
    expect(bobResults.at(-1)!.errors?.[0]).toMatchObject({
      message: 'You were removed from this session',
      extensions: { code: 'FORBIDDEN' },
    });

    expectData(await t.gql(DeleteSession, { id: session.id }, alice.apiKey));
    const aliceResults = await alices.ended;
    expect(aliceResults.map((r) => r.data?.sessionEvents?.__typename ?? r.errors?.[0]?.extensions?.code)).toEqual([
      'SessionUserRemoved',
      'SESSION_DELETED',
    ]);
  });

  it('deleting an API key closes the sockets opened with it', async () => {
    const { session } = await startSession(alice);
    const spare = (await t.services.apiKeys.create(alice.id)).apiKey;
    const sub = wsSubscribe(ws.connect(spare), Events, { sessionId: session.id });
    await expect.poll(() => t.services.bus.subscriberCount()).toBeGreaterThanOrEqual(1);
    expectData(await t.gql(DeleteKey, { apiKey: spare }, alice.apiKey));
    const closed = await sub.ended.then(
      () => null,
      (e: { code?: number; reason?: string }) => ({ code: e.code, reason: e.reason }),
    );
    expect(closed).toEqual({ code: 4403, reason: 'The API key of this connection was deleted' });
  });

  it('a client that stops reading is dropped with a reason, and resumes with after', async () => {
    const { session } = await startSession(alice);
    await settledSession(t, alice, session.rawId);
    const big = 'y'.repeat(16 * 1024);
    llm.enqueue({ tokens: Array.from({ length: 600 }, (_, i) => `${String(i).padStart(3, '0')}${big}`) });

    let socket: { _socket: { pause(): void; resume(): void } } | undefined;
    const client = ws.connect(alice.apiKey, { onOpened: (s) => (socket = s as never) });
    const slow = wsSubscribe(client, Events, { sessionId: session.id });
    await expect.poll(() => socket !== undefined && t.services.bus.subscriberCount() >= 1).toBe(true);
    socket!._socket.pause();
    expectData(await t.gql(Send, { input: { sessionId: session.id, content: 'a long one' } }, alice.apiKey));
    await settledSession(t, alice, session.rawId);
    // The server gives up on the socket; the client then reads what was already on its way.
    await expect.poll(() => t.app.websocket.stats().droppedAsSlow, { timeout: 20_000 }).toBe(1);
    socket!._socket.resume();
    const closed = await slow.ended.then(
      () => null,
      (e: { code?: number; reason?: string }) => ({ code: e.code, reason: e.reason }),
    );
    expect(closed).toEqual({ code: 1013, reason: expect.stringContaining('Slow consumer') });
    const seen = slow.results.map((r) => r.data!.sessionEvents);
    const before = seen.filter((e) => e.__typename === 'AssistantToken').length;
    expect(before).toBeLessThan(600);

    const resumed = wsSubscribe(ws.connect(alice.apiKey), Events, { sessionId: session.id, after: seen.at(-1)!.seq });
    await resumed.waitFor((r) => r.data?.sessionEvents.__typename === 'PromptEnded');
    resumed.unsubscribe();
    const rest = resumed.results.map((r) => r.data!.sessionEvents).filter((e) => e.__typename === 'AssistantToken');
    expect(before + rest.length).toBe(600);
  });
});

describe('subscriptions over GraphQL SSE', () => {
  it('sessionEvents streams a reply as server-sent events to a client with the key header', async () => {
    // Titled from the start: no title is generated after the first reply, to arrive on this subscription.
    const { session } = await startSession(alice, { title: 'Over SSE' });
    await settledSession(t, alice, session.rawId);
    const controller = new AbortController();
    const response = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      signal: controller.signal,
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-api-key': alice.apiKey },
      body: JSON.stringify({
        query: `subscription { sessionEvents(sessionId: "${session.id}") { __typename ... on PromptStarted { promptId } ... on AssistantToken { text } ... on PromptEnded { promptId } } }`,
      }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await expect.poll(() => t.services.bus.subscriberCount()).toBe(1);
    const { promptId } = expectData(await t.gql(Send, { input: { sessionId: session.id, content: 'over sse' } }, alice.apiKey)).sendMessage;
    // The first prompt's end may still be on its way when its reply reads as settled (it is
    // published after the reply is saved), and may come before or among this prompt's events:
    // those of this prompt start at its PromptStarted and end at its PromptEnded.
    const types: string[] = [];
    let text = '';
    const decoder = new TextDecoder();
    let buffer = '';
    let ended = false;
    for await (const chunk of response.body!) {
      buffer += decoder.decode(chunk, { stream: true });
      const parts = buffer.split('\n\n');
      buffer = parts.pop()!;
      for (const part of parts) {
        const data = part.split('\n').find((l) => l.startsWith('data: '));
        if (!data) continue;
        const event = JSON.parse(data.slice(6)).data?.sessionEvents;
        if (!event || (event.__typename === 'PromptEnded' && event.promptId !== promptId)) continue;
        if (types.length === 0 && !(event.__typename === 'PromptStarted' && event.promptId === promptId)) continue;
        types.push(event.__typename);
        if (event.text) text += event.text;
        if (event.__typename === 'PromptEnded' && event.promptId === promptId) ended = true;
      }
      if (ended) break;
    }
    controller.abort();
    expect(types).toEqual(['PromptStarted', 'AssistantToken', 'AssistantToken', 'AssistantToken', 'AssistantMessage', 'PromptEnded']);
    expect(text).toBe('Hi from Muse');
  });
});

describe('autonomous sessions', () => {
  let agentIds: string[];
  beforeAll(async () => {
    const f = fixtures(t);
    agentIds = [(await f.agent(alice, { name: 'Ada' })).id, (await f.agent(alice, { name: 'Bo' })).id];
  });
  beforeEach(() => llm.setDefault({ tokens: ['Quite', ' so', '.'] }));

  const off = { autoReply: false, replyInterval: 60, actorSelectionMethod: 'RANDOM' as const };

  it('refuses auto-reply without a budget, and shows the settings on the session', async () => {
    const refused = await t.gql(
      SendAutonomous,
      { input: { agentIds, content: 'Hello', autonomySettings: { ...off, autoReply: true } } },
      alice.apiKey,
    );
    expect(expectGraphQLError(refused, 'BAD_USER_INPUT').message).toBe('Session cannot have auto-reply enabled without a set budget');
    const bad = await t.gql(
      SendAutonomous,
      { input: { agentIds, content: 'Hello', autonomySettings: { ...off, replyInterval: 4000 } } },
      alice.apiKey,
    );
    expect(expectGraphQLError(bad, 'BAD_USER_INPUT').extensions?.field).toBe('autonomySettings.replyInterval');
    const sent = expectData(await t.gql(SendAutonomous, { input: { agentIds, content: 'Hello', autonomySettings: off } }, alice.apiKey));
    expect(sent.sendMessage.session.autonomySettings).toEqual(off);
    const id = sent.sendMessage.session.rawId;
    expectGraphQLError(
      await t.gql(UpdateSession, { id, input: { autonomySettings: { ...off, autoReply: true } } }, alice.apiKey),
      'BAD_USER_INPUT',
    );
    expectGraphQLError(await t.gql(UpdateSession, { id, input: { title: 'Mine now' } }, bob.apiKey), 'FORBIDDEN');
    const renamed = expectData(
      await t.gql(UpdateSession, { id, input: { title: 'Tides', autonomySettings: { ...off, replyInterval: 5 } } }, alice.apiKey),
    );
    expect(renamed.updateSession).toEqual({ rawId: id, title: 'Tides', autonomySettings: { ...off, replyInterval: 5 } });
  });

  it('streams each turn to sessionEvents, and the stop with its reason when the owner turns it off', async () => {
    // An empty session: an agent opens the conversation as soon as the loop starts.
    const sent = expectData(await t.gql(SendAutonomous, { input: { agentIds, budget: { turnBudget: 50 } } }, alice.apiKey));
    const sessionId = sent.sendMessage.session.rawId;
    const watching = t.services.bus.subscriberCount();
    const events = wsSubscribe(ws.connect(alice.apiKey), AutonomyEvents, { sessionId });
    // Nothing has happened in the session yet to replay: the subscription must be open before the loop starts.
    await expect.poll(() => t.services.bus.subscriberCount()).toBe(watching + 1);
    const on = { autoReply: true, replyInterval: 30, actorSelectionMethod: 'RANDOM_EXCLUDE_LAST' as const };
    expect(
      expectData(await t.gql(UpdateSession, { id: sessionId, input: { autonomySettings: on } }, alice.apiKey)).updateSession
        .autonomySettings,
    ).toEqual(on);
    const turn = await events.waitFor((r) => r.data?.sessionEvents.__typename === 'AutonomousTurnStarted');
    const turnEvent = turn.data!.sessionEvents as { promptId: string; replyId: string };
    expect(turnEvent.promptId).toBe(turnEvent.replyId);
    const reply = await events.waitFor(
      (r) =>
        r.data?.sessionEvents.__typename === 'AssistantMessage' &&
        (r.data.sessionEvents as { promptId: string }).promptId === turnEvent.promptId,
    );
    expect((reply.data!.sessionEvents as { message: { content: string } }).message.content).toBe('Quite so.');
    // The next turn waits 30 s; the owner turns the loop off meanwhile.
    const turnedOff = expectData(
      await t.gql(UpdateSession, { id: sessionId, input: { autonomySettings: { ...on, autoReply: false } } }, alice.apiKey),
    );
    expect(turnedOff.updateSession.autonomySettings?.autoReply).toBe(false);
    const stop = await events.waitFor((r) => r.data?.sessionEvents.__typename === 'AutonomyStopped');
    expect(stop.data!.sessionEvents).toMatchObject({ reason: 'TURNED_OFF', detail: 'Auto-reply was turned off' });
    events.unsubscribe();
    // The turn job that took the turn may have sent the next one just after the stop dropped the
    // waiting one: it takes its own back once it sees the loop is off.
    await until('no turn waiting', async () => !(await t.services.jobs.waiting('autonomous-turn', sessionId)), { timeoutMs: 10_000 });
  });
});
