import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { buildSchema, isObjectType } from 'graphql';
import { afterAll, describe, expect, it } from 'vitest';
import { printedSchema } from '../../src/graphql/print.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { newSession, settledSession } from '../helpers/sessions.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { setUp } from '../helpers/set-up.ts';

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

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Hello', ' Apollo'] });
  t = await start.app({ llm: { baseUrl: llm.baseUrl } });
  alice = await t.createUser('alice');
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
    for (const type of ['Agent', 'Concept', 'Model', 'Creation', 'Creator', 'Session', 'Message', 'Share', 'Tool', 'Deployment', 'Trigger'])
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
