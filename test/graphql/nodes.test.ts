import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { newSession, settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError, expectCleanErrors, postDocument } from './support.ts';

const Own = graphql(`
  query NodesOwn($agent: ID!, $concept: ID!, $model: ID!, $creation: ID!, $session: ID!) {
    me { id rawId }
    agent(id: $agent) { id rawId owner { id } creator { id } }
    concept(id: $concept) { id rawId }
    model(id: $model) { id rawId }
    creation(id: $creation) { id rawId }
    session(id: $session) { id rawId messages(last: 1) { edges { node { id rawId promptId } } } }
    tools { id key }
    deployments { id rawId }
    triggers { id rawId }
  }
`);
const ShareIt = graphql(`
  mutation NodesShare($id: ID!) {
    shareSession(id: $id) { id shareId sessionId }
  }
`);
const Node = graphql(`
  query NodesNode($id: ID!) {
    node(id: $id) {
      __typename
      id
      ... on Agent { rawId name }
      ... on Concept { rawId name }
      ... on Model { rawId name }
      ... on Creation { rawId name }
      ... on Creator { rawId username }
      ... on Session { rawId title }
      ... on Message { rawId content }
      ... on Deployment { rawId platform }
      ... on Trigger { rawId name }
      ... on Share { shareId sessionId }
      ... on Tool { key name }
    }
  }
`);
const Nodes = graphql(`
  query NodesNodes($ids: [ID!]!) {
    nodes(ids: $ids) { __typename id }
  }
`);
const UpdateAgent = graphql(`
  mutation NodesUpdateAgent($id: ID!, $name: String!) {
    updateAgent(id: $id, input: { name: $name }) { id rawId name }
  }
`);
const Like = graphql(`
  mutation NodesLike($id: ID!) {
    likeCreation(id: $id) { id likeCount }
  }
`);
const SessionById = graphql(`
  query NodesSession($id: ID!) {
    session(id: $id) { id rawId }
  }
`);
const Events = graphql(`
  subscription NodesEvents($sessionId: ID!) {
    sessionEvents(sessionId: $sessionId) {
      __typename
      sessionId
      ... on AssistantToken { messageId agentId }
      ... on AssistantMessage { message { id rawId } agentId }
    }
  }
`);
const Send = graphql(`
  mutation NodesSend($input: SendMessageInput!) {
    sendMessage(input: $input) { promptId replyIds session { id } }
  }
`);

const globalId = (type: string, id: string) => Buffer.from(`${type}:${id}`).toString('base64');

let t: TestApp;
let llm: FakeOpenAI;
let alice: TestUser;
let bob: TestUser;
const ws = graphqlWsClients(() => t.url);
/** Alice's objects: raw ids, and the global ids her own queries gave for them. */
const raw: Record<string, string> = {};
const ids: Record<string, string> = {};

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Hi', ' there'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl } });
  [alice, bob] = [await t.createUser('alice'), await t.createUser('bob')];
  const f = fixtures(t);
  const agent = await f.agent(alice, { name: 'Secret Diary', public: false });
  raw.agent = agent.id;
  raw.concept = (await f.concept(alice, { name: 'Secret look', agent: agent.id })).id;
  raw.model = (await f.model(alice, { public: false, name: 'Secret LoRA' })).id;
  raw.creation = (await f.creation(alice, { public: false })).id;
  raw.deployment = (await f.deployment(agent.id, alice.id)).id;
  raw.trigger = (await f.trigger(agent.id, alice.id)).id;
  raw.session = await newSession(t, alice, [agent.id], { content: 'a private word' });
  await settledSession(t, alice, raw.session);

  const own = expectData(
    await t.gql(
      Own,
      { agent: raw.agent, concept: raw.concept, model: raw.model, creation: raw.creation, session: raw.session },
      alice.apiKey,
    ),
  );
  const reply = own.session.messages.edges[0]!.node;
  Object.assign(ids, {
    creator: own.me.id,
    agent: own.agent.id,
    agentCreator: own.agent.creator.id,
    concept: own.concept.id,
    model: own.model.id,
    creation: own.creation.id,
    session: own.session.id,
    message: reply.id,
    prompt: reply.promptId!,
    deployment: own.deployments[0]!.id,
    trigger: own.triggers[0]!.id,
    tool: own.tools[0]!.id,
  });
  raw.creator = own.me.rawId;
  raw.message = reply.rawId;
  raw.tool = own.tools[0]!.key;
  expect(own.agent.owner.id).toBe(ids.creator);
  const share = expectData(await t.gql(ShareIt, { id: ids.session! }, alice.apiKey)).shareSession;
  expect(share.sessionId).toBe(ids.session);
  ids.share = share.id;
  raw.share = share.shareId;
});
afterEach(() => ws.disposeAll());
afterAll(async () => {
  await ws.disposeAll();
});

const typeOf: Record<string, string> = {
  creator: 'Creator',
  agent: 'Agent',
  agentCreator: 'Creator',
  concept: 'Concept',
  model: 'Model',
  creation: 'Creation',
  session: 'Session',
  message: 'Message',
  prompt: 'Message',
  deployment: 'Deployment',
  trigger: 'Trigger',
  tool: 'Tool',
  share: 'Share',
};

describe('node(id:)', () => {
  it('refetches every node type by the id its own query gave, as the same object', async () => {
    for (const [name, id] of Object.entries(ids)) {
      const node = expectData(await t.gql(Node, { id }, alice.apiKey)).node!;
      expect(node, name).toMatchObject({ __typename: typeOf[name], id });
      // The global id is opaque to clients but is the type and the raw id, so REST ids and global ids meet.
      const rawOf =
        name === 'tool'
          ? raw.tool
          : name === 'share'
            ? raw.share
            : name === 'agentCreator'
              ? raw.agent
              : name === 'prompt'
                ? undefined
                : raw[name];
      if (rawOf) expect(id, name).toBe(globalId(typeOf[name]!, rawOf));
      if ('rawId' in node && rawOf) expect(node.rawId, name).toBe(rawOf);
    }
    const agent = expectData(await t.gql(Node, { id: ids.agent! }, alice.apiKey)).node;
    expect(agent).toMatchObject({ __typename: 'Agent', name: 'Secret Diary' });
  });

  it('nodes(ids:) answers in order, and a share needs no key', async () => {
    const all = Object.values(ids);
    const nodes = expectData(await t.gql(Nodes, { ids: all }, alice.apiKey)).nodes;
    expect(nodes.map((n) => n?.id)).toEqual(all);
    const share = expectData(await t.gql(Node, { id: ids.share! })).node;
    expect(share).toMatchObject({ __typename: 'Share', shareId: raw.share });
  });

  it('gives a stranger null and an error for each private object, and none of its fields', async () => {
    const secret = Object.entries(ids).filter(([name]) => !['share', 'tool', 'creator'].includes(name));
    for (const [name, id] of secret) {
      const response = await postDocument(t, Node, { id }, bob.apiKey);
      expect(response.status, name).toBe(200);
      expect(response.json.data, name).toEqual({ node: null });
      expect(['FORBIDDEN', 'NOT_FOUND'], name).toContain(response.json.errors[0].extensions.code);
      expect(response.json.errors[0].path, name).toEqual(['node']);
      expectCleanErrors(response.json.errors);
      for (const word of ['Secret', 'private word', 'Hi there', raw.agent]) expect(response.text, name).not.toContain(word);
    }
    const mixed = await t.gql(Nodes, { ids: [ids.creator!, ids.agent!, ids.tool!, ids.session!] }, bob.apiKey);
    expect(mixed.data!.nodes.map((n) => n?.__typename ?? null)).toEqual(['Creator', null, 'Tool', null]);
    // The nodes load in parallel, so their errors come in whichever order they were refused.
    expect(mixed.errors!.map((e) => e.path).sort((x, y) => Number(x![1]) - Number(y![1]))).toEqual([
      ['nodes', 1],
      ['nodes', 3],
    ]);
  });

  it('answers an id that names nothing with null and NOT_FOUND, and asks for a key', async () => {
    for (const id of [
      'garbage',
      raw.agent!,
      globalId('Nope', raw.agent!),
      globalId('Agent', 'no-such-agent'),
      globalId('Creator', '\u0000'),
    ]) {
      const response = await t.gql(Node, { id }, alice.apiKey);
      expect(response.data).toEqual({ node: null });
      expectGraphQLError(response, 'NOT_FOUND');
    }
    expectGraphQLError(await t.gql(Node, { id: ids.agent! }), 'UNAUTHENTICATED');
  });
});

describe('id arguments take the global id and the raw id', () => {
  it('queries and mutations find the same object by either', async () => {
    for (const id of [ids.session!, raw.session!]) {
      expect(expectData(await t.gql(SessionById, { id }, alice.apiKey)).session).toEqual({ id: ids.session, rawId: raw.session });
    }
    const renamed = expectData(await t.gql(UpdateAgent, { id: ids.agent!, name: 'Renamed by global id' }, alice.apiKey)).updateAgent;
    expect(renamed).toEqual({ id: ids.agent, rawId: raw.agent, name: 'Renamed by global id' });
    expect(expectData(await t.gql(UpdateAgent, { id: raw.agent!, name: 'Secret Diary' }, alice.apiKey)).updateAgent.id).toBe(ids.agent);
    expect(expectData(await t.gql(Like, { id: ids.creation! }, alice.apiKey)).likeCreation).toEqual({ id: ids.creation, likeCount: 1 });
    expectGraphQLError(await t.gql(UpdateAgent, { id: ids.agent!, name: 'hijack' }, bob.apiKey), 'FORBIDDEN');
  });

  it('a subscription by global session id streams events whose ids match the objects', async () => {
    const sub = wsSubscribe(ws.connect(alice.apiKey), Events, { sessionId: ids.session! });
    await expect.poll(() => t.services.bus.subscriberCount()).toBe(1);
    const sent = expectData(await t.gql(Send, { input: { sessionId: ids.session!, content: 'again' } }, alice.apiKey)).sendMessage;
    expect(sent.session.id).toBe(ids.session);
    const done = await sub.waitFor((r) => r.data?.sessionEvents.__typename === 'AssistantMessage');
    sub.unsubscribe();
    const token = sub.results.find((r) => r.data?.sessionEvents.__typename === 'AssistantToken')!.data!.sessionEvents;
    const message = done.data!.sessionEvents;
    if (message.__typename !== 'AssistantMessage' || token.__typename !== 'AssistantToken') throw new Error('unexpected events');
    expect(message.sessionId).toBe(ids.session);
    expect(message.agentId).toBe(ids.agent);
    expect(token.messageId).toBe(message.message.id);
    expect(sent.replyIds).toEqual([message.message.id]);
    expect(expectData(await t.gql(Node, { id: token.messageId }, alice.apiKey)).node).toMatchObject({
      __typename: 'Message',
      rawId: message.message.rawId,
      content: 'Hi there',
    });
  });
});
