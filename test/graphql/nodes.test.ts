import { afterAll, afterEach, describe, expect, it, beforeAll } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { newSession, settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError, expectCleanErrors, postDocument } from './support.ts';
import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { buildSchema, isObjectType } from 'graphql';
import { printedSchema } from '../../src/graphql/print.ts';

/**
 * Global ids and the Node interface, as GraphQL clients rely on them: node(id:), id arguments, and
 * Apollo Client's normalized cache. One app and one fake model for both (each app start makes and
 * migrates a database); each describe has users of its own and sets the model's reply before its
 * objects are made.
 */
let app: TestApp;
let model: FakeOpenAI;

setUp(async (start) => {
  model = await start.fakeOpenAI();
  app = await start.app({ llm: { baseUrl: model.baseUrl } });
});

describe('nodes', () => {
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

  beforeAll(async () => {
    llm = model;
    llm.setDefault({ tokens: ['Hi', ' there'] });
    t = app;
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
});

describe('apollo', () => {
  const schema = buildSchema(printedSchema());
  const nodeTypes = Object.values(schema.getTypeMap())
    .filter((type) => isObjectType(type) && type.getInterfaces().some((i) => i.name === 'Node'))
    .map((type) => type.name);

  /** One screen of a chat client: something of every node type, nested as the graph links them. */
  const Everything = gql`
  query ApolloEverything($agent: ID!, $concept: ID!, $model: ID!, $creation: ID!, $session: ID!, $share: ID!, $node: ID!) {
    me { id username agents(first: 5) { edges { node { id name owner { id username } } } } }
    agents(first: 5) { edges { node { id name creator { id username } } } }
    agent(id: $agent) { id name owner { id } }
    concept(id: $concept) { id name agent { id name } owner { id } }
    model(id: $model) { id name owner { id } }
    creation(id: $creation) { id name creator { id } agent { id } tool { id key } }
    session(id: $session) {
      id
      title
      owner { id }
      agents { id name }
      messages(last: 5) { edges { node { id content sender { id username } agent { id } } } }
    }
    tools { id key name }
    deployments { id agent { id } owner { id } }
    triggers { id agent { id } }
    share(shareId: $share) { id shareId title }
    node(id: $node) { id ... on Agent { name } }
  }
`;
  const Rename = gql`
  mutation ApolloRename($id: ID!, $name: String!) {
    updateAgent(id: $id, input: { name: $name }) { id name }
  }
`;
  const ShareIt = gql`
  mutation ApolloShare($id: ID!) {
    shareSession(id: $id) { id shareId }
  }
`;

  let t: TestApp;
  let llm: FakeOpenAI;
  let alice: TestUser;
  let requests: string[];
  let client: ApolloClient;
  const raw: Record<string, string> = {};

  beforeAll(async () => {
    llm = model;
    llm.setDefault({ tokens: ['Hello', ' Apollo'] });
    t = app;
    alice = await t.createUser('alice-apollo');
    const f = fixtures(t);
    const agent = await f.agent(alice, { name: 'Apollo agent', public: true });
    raw.agent = agent.id;
    raw.concept = (await f.concept(alice, { agent: agent.id })).id;
    raw.model = (await f.model(alice)).id;
    raw.creation = (await f.creation(alice, { agentId: agent.id })).id;
    await f.deployment(agent.id, alice.id);
    await f.trigger(agent.id, alice.id);
    raw.session = await newSession(t, alice, [agent.id]);
    await settledSession(t, alice, raw.session);
    requests = [];
    client = new ApolloClient({
      cache: new InMemoryCache({ possibleTypes: { Node: nodeTypes } }),
      link: new HttpLink({
        uri: `${t.url}/graphql`,
        headers: { 'x-api-key': alice.apiKey },
        fetch: (input, init) => {
          requests.push(String(init?.body));
          return fetch(input, init);
        },
      }),
    });
    const shared = await client.mutate({ mutation: ShareIt, variables: { id: raw.session } });
    raw.share = (shared.data as { shareSession: { shareId: string } }).shareSession.shareId;
    raw.node = Buffer.from(`Agent:${agent.id}`).toString('base64');
  });
  afterAll(async () => {
    client?.stop();
  });

  type Entity = Record<string, unknown>;

  /** Every object with a __typename under `value` that the cache kept inline instead of as a reference. */
  function inlineObjects(value: unknown, path: string, out: string[]) {
    if (Array.isArray(value)) value.forEach((v, i) => inlineObjects(v, `${path}[${i}]`, out));
    else if (value && typeof value === 'object') {
      const object = value as Entity;
      if (typeof object.__typename === 'string' && 'id' in object) out.push(`${path} (${object.__typename})`);
      for (const [key, child] of Object.entries(object)) inlineObjects(child, `${path}.${key}`, out);
    }
  }

  describe('Apollo Client', () => {
    it('normalizes every node type by Typename:id, with no object carrying an id left inline', async () => {
      const result = await client.query({ query: Everything, variables: raw });
      expect(result.error).toBeUndefined();
      const cache = client.cache.extract() as Record<string, Entity>;
      const keys = Object.keys(cache).filter((k) => k !== 'ROOT_QUERY' && k !== 'ROOT_MUTATION');
      for (const key of keys) {
        const entity = cache[key]!;
        expect(key, `${key} is not normalized by its id`).toBe(`${entity.__typename}:${entity.id}`);
        // Global ids are distinct across types, so the type prefix alone keeps no two objects apart.
        expect(Buffer.from(String(entity.id), 'base64').toString().startsWith(`${entity.__typename}:`)).toBe(true);
      }
      const typenames = new Set(keys.map((k) => k.slice(0, k.indexOf(':'))));
      for (const type of [
        'Agent',
        'Concept',
        'Model',
        'Creation',
        'Creator',
        'Session',
        'Message',
        'Share',
        'Tool',
        'Deployment',
        'Trigger',
      ])
        expect(typenames, type).toContain(type);
      const inline: string[] = [];
      for (const [key, entity] of Object.entries(cache)) {
        for (const [field, value] of Object.entries(entity)) if (field !== '__typename') inlineObjects(value, `${key}.${field}`, inline);
      }
      expect(inline).toEqual([]);
      // Reached by different paths (agents, agent, node), the agent is one object in the cache.
      const agentKey = `Agent:${Buffer.from(`Agent:${raw.agent}`).toString('base64')}`;
      expect(cache[agentKey]).toMatchObject({ name: 'Apollo agent' });
      expect(cache.ROOT_QUERY![`agent({"id":"${raw.agent}"})`]).toEqual({ __ref: agentKey });
    });

    it('an update mutation changes the cached agent everywhere it is shown, without a refetch', async () => {
      const first = await client.query({ query: Everything, variables: raw });
      const globalAgent = (first.data as { agent: { id: string } }).agent.id;
      const before = requests.length;
      const renamed = await client.mutate({ mutation: Rename, variables: { id: globalAgent, name: 'Renamed in place' } });
      expect(renamed.error).toBeUndefined();
      expect(requests.length).toBe(before + 1);
      const after = await client.query({ query: Everything, variables: raw, fetchPolicy: 'cache-only' });
      const data = after.data as {
        agent: { name: string };
        node: { name: string };
        agents: { edges: { node: { id: string; name: string } }[] };
        concept: { agent: { name: string } };
        session: { agents: { name: string }[] };
      };
      expect(data.agent.name).toBe('Renamed in place');
      expect(data.node.name).toBe('Renamed in place');
      expect(data.concept.agent.name).toBe('Renamed in place');
      expect(data.session.agents.map((a) => a.name)).toEqual(['Renamed in place']);
      expect(data.agents.edges.find((e) => e.node.id === globalAgent)!.node.name).toBe('Renamed in place');
      expect(requests.length).toBe(before + 1);
    });
  });
});
