import { describe, expect, it } from 'vitest';
import type { GraphQLResponse, TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectCleanErrors } from './support.ts';

const AuthMe = graphql(`
  query AuthMe {
    me { id username }
  }
`);
const AuthAgent = graphql(`
  query AuthAgent($id: ID!) {
    agent(id: $id) { id name }
  }
`);
const AuthConcept = graphql(`
  query AuthConcept($id: ID!) {
    concept(id: $id) { id name }
  }
`);
const AuthModel = graphql(`
  query AuthModel($id: ID!) {
    model(id: $id) { id name }
  }
`);
const AuthTools = graphql(`
  query AuthTools {
    tools { key }
  }
`);
const AuthCreation = graphql(`
  query AuthCreation($id: ID!) {
    creation(id: $id) { id likeCount }
  }
`);
const AuthDeployments = graphql(`
  query AuthDeployments {
    deployments { id }
  }
`);
const AuthTriggers = graphql(`
  query AuthTriggers {
    triggers { id }
  }
`);
const AuthCreateAgent = graphql(`
  mutation AuthCreateAgent($input: CreateAgentInput!) {
    createAgent(input: $input) { id }
  }
`);
const AuthUpdateAgent = graphql(`
  mutation AuthUpdateAgent($id: ID!, $input: UpdateAgentInput!) {
    updateAgent(id: $id, input: $input) { id name }
  }
`);
const AuthCreateConcept = graphql(`
  mutation AuthCreateConcept($input: CreateConceptInput!) {
    createConcept(input: $input) { id }
  }
`);
const AuthUpdateConcept = graphql(`
  mutation AuthUpdateConcept($id: ID!, $input: UpdateConceptInput!) {
    updateConcept(id: $id, input: $input) { id name }
  }
`);
const AuthLikeCreation = graphql(`
  mutation AuthLikeCreation($id: ID!) {
    likeCreation(id: $id) { id likeCount }
  }
`);
const AuthUnlikeCreation = graphql(`
  mutation AuthUnlikeCreation($id: ID!) {
    unlikeCreation(id: $id) { id likeCount }
  }
`);
const AuthDeleteApiKey = graphql(`
  mutation AuthDeleteApiKey($apiKey: String!) {
    deleteApiKey(apiKey: $apiKey)
  }
`);
const AuthOwnerView = graphql(`
  query AuthOwnerView($agent: ID!, $concept: ID!, $creation: ID!) {
    agent(id: $agent) { name }
    concept(id: $concept) { name }
    creation(id: $creation) { likeCount likedByMe }
    me { agents(first: 50) { edges { node { rawId } } } }
  }
`);

let t: TestApp;
let alice: TestUser;
let ids: { agent: string; concept: string; model: string; creation: string; likedCreation: string };

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  const f = fixtures(t);
  const agent = await f.agent(alice, { name: 'Original name' });
  const concept = await f.concept(alice, { name: 'Original concept' });
  const model = await f.model(alice);
  const creation = await f.creation(alice);
  const likedCreation = await f.creation(alice);
  await t.services.creations.like(await t.services.apiKeys.authenticate(alice.apiKey), likedCreation.id);
  await f.deployment(agent.id, alice.id);
  await f.trigger(agent.id, alice.id);
  ids = { agent: agent.id, concept: concept.id, model: model.id, creation: creation.id, likedCreation: likedCreation.id };
});

type Operation = (key: string | null) => Promise<GraphQLResponse<unknown>>;

/** Every root field and mutation, called on real objects so only the key can be the problem. */
const operations: Record<string, Operation> = {
  me: (key) => t.gql(AuthMe, {}, key),
  agent: (key) => t.gql(AuthAgent, { id: ids.agent }, key),
  concept: (key) => t.gql(AuthConcept, { id: ids.concept }, key),
  model: (key) => t.gql(AuthModel, { id: ids.model }, key),
  tools: (key) => t.gql(AuthTools, {}, key),
  creation: (key) => t.gql(AuthCreation, { id: ids.creation }, key),
  deployments: (key) => t.gql(AuthDeployments, {}, key),
  triggers: (key) => t.gql(AuthTriggers, {}, key),
  createAgent: (key) => t.gql(AuthCreateAgent, { input: { name: 'Sneaky', key: 'sneaky-agent' } }, key),
  updateAgent: (key) => t.gql(AuthUpdateAgent, { id: ids.agent, input: { name: 'Hijacked' } }, key),
  createConcept: (key) =>
    t.gql(AuthCreateConcept, { input: { name: 'Sneaky concept', images: [{ image: 'https://example.com/x.jpg' }] } }, key),
  updateConcept: (key) => t.gql(AuthUpdateConcept, { id: ids.concept, input: { name: 'Hijacked concept' } }, key),
  likeCreation: (key) => t.gql(AuthLikeCreation, { id: ids.creation }, key),
  unlikeCreation: (key) => t.gql(AuthUnlikeCreation, { id: ids.likedCreation }, key),
  deleteApiKey: (key) => t.gql(AuthDeleteApiKey, { apiKey: alice.apiKey }, key),
};

/** Replaces the last character of the secret, keeping the key well formed. */
const tampered = (key: string) => key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');

const badKeys: Record<string, () => string | null> = {
  'no key': () => null,
  'a malformed key': () => 'not-a-real-key',
  'a well-formed key that does not exist': () => `pk_${'Q'.repeat(16)}_${'x'.repeat(43)}`,
  "a real key's id with the wrong secret": () => tampered(alice.apiKey),
};

describe.each(Object.keys(badKeys))('with %s', (keyName) => {
  it.each(Object.keys(operations))('%s answers 401 UNAUTHENTICATED', async (field) => {
    const response = await operations[field]!(badKeys[keyName]!());
    expect(response.status).toBe(401);
    expect(response.data).toBeNull();
    expect(response.errors).toHaveLength(1);
    expect(response.errors![0]!.extensions?.code).toBe('UNAUTHENTICATED');
    expect(response.errors![0]!.path).toEqual([field]);
    expect(response.errors![0]!.message).toMatch(keyName === 'no key' ? /missing api key.*x-api-key/i : /invalid api key/i);
    expectCleanErrors(response.errors);
  });
});

describe('rejected calls', () => {
  it('changed nothing: same names, like counts, agents, and the key still works', async () => {
    for (const run of Object.values(operations)) {
      await run(null);
      await run(tampered(alice.apiKey));
    }
    const data = expectData(await t.gql(AuthOwnerView, { agent: ids.agent, concept: ids.concept, creation: ids.creation }, alice.apiKey));
    expect(data.agent.name).toBe('Original name');
    expect(data.concept.name).toBe('Original concept');
    expect(data.creation).toEqual({ likeCount: 0, likedByMe: false });
    expect(data.me.agents.edges.map((e) => e.node.rawId)).toEqual([ids.agent]);
    const liked = expectData(await t.gql(AuthCreation, { id: ids.likedCreation }, alice.apiKey));
    expect(liked.creation.likeCount).toBe(1);
    expect(await t.db.concept.count()).toBe(1);
  });

  it('the same key in the header makes every root query succeed', async () => {
    for (const field of ['me', 'agent', 'concept', 'model', 'tools', 'creation', 'deployments', 'triggers']) {
      const response = await operations[field]!(alice.apiKey);
      expect(response.errors, field).toBeUndefined();
      expect(response.status).toBe(200);
      expect((response.data as Record<string, unknown>)[field], field).toBeTruthy();
    }
  });
});
