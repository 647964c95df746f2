import { beforeAll, describe, expect, it } from 'vitest';
import { credit } from '../../src/domain/manna/stores/ledger.ts';
import type { GraphQLResponse, TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectCleanErrors, expectData, expectGraphQLError, postDocument, postRaw } from './support.ts';

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

const KeysDelete = graphql(`
  mutation KeysDelete($apiKey: String!) {
    deleteApiKey(apiKey: $apiKey)
  }
`);
const KeysWhoAmI = graphql(`
  query KeysWhoAmI {
    me { username }
  }
`);

const MeProfile = graphql(`
  query MeProfile {
    me { rawId username type balance subscriptionBalance foreverBalance subscriptionTier featureFlags agentProfile { rawId } }
  }
`);
const MeOwnerOfAgent = graphql(`
  query MeOwnerOfAgent($id: ID!) {
    agent(id: $id) {
      owner { username balance subscriptionBalance foreverBalance subscriptionTier featureFlags }
      creator { username balance }
    }
  }
`);
const MeAgentsPage = graphql(`
  query MeAgentsPage($first: Int!, $after: String) {
    me {
      agents(first: $first, after: $after) {
        edges { cursor node { rawId key public createdAt } }
        pageInfo { hasNextPage endCursor }
      }
    }
  }
`);
const MeAgentsOfOwner = graphql(`
  query MeAgentsOfOwner($id: ID!) {
    agent(id: $id) { owner { username agents(first: 50) { edges { node { rawId public } } } } }
  }
`);
const MeDeployments = graphql(`
  query MeDeployments {
    deployments { rawId platform config valid createdAt agent { rawId key } owner { username } }
  }
`);
const MeDeploymentType = graphql(`
  query MeDeploymentType {
    __type(name: "Deployment") { fields { name } }
  }
`);
const MeTriggers = graphql(`
  query MeTriggers {
    triggers { rawId name cron timezone triggerPrompt status lastRun nextRun createdAt session { rawId } agent { rawId } owner { username } }
  }
`);

let t: TestApp;
let alice: TestUser;
let f: ReturnType<typeof fixtures>;
let ids: { agent: string; concept: string; model: string; creation: string; likedCreation: string };

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  f = fixtures(t);
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

// Deleting keys: what deleteApiKey answers, and which key works after.
const extraKey = async (userId: string) => (await t.services.apiKeys.create(userId)).apiKey;

async function expectKeyWorks(key: string, username: string) {
  expect(expectData(await t.gql(KeysWhoAmI, {}, key)).me.username).toBe(username);
}

async function expectKeyRejected(key: string) {
  const response = await t.gql(KeysWhoAmI, {}, key);
  expect(response.status).toBe(401);
  expect(response.data).toBeNull();
  expect(expectGraphQLError(response, 'UNAUTHENTICATED').message).toMatch(/invalid api key/i);
}

describe('deleteApiKey', () => {
  it('deletes another of your keys: true, then that key is 401 and the one in use still works', async () => {
    const user = await t.createUser('olga');
    const second = await extraKey(user.id);
    await expectKeyWorks(second, 'olga');

    expect(expectData(await t.gql(KeysDelete, { apiKey: second }, user.apiKey)).deleteApiKey).toBe(true);
    await expectKeyRejected(second);
    await expectKeyWorks(user.apiKey, 'olga');
  });

  it('deletes the key in use: true, and the very next request with it is 401', async () => {
    const user = await t.createUser('pavel');
    const spare = await extraKey(user.id);
    expect(expectData(await t.gql(KeysDelete, { apiKey: user.apiKey }, user.apiKey)).deleteApiKey).toBe(true);
    await expectKeyRejected(user.apiKey);
    // A deleted key cannot delete anything either.
    const response = await t.gql(KeysDelete, { apiKey: spare }, user.apiKey);
    expect(response.status).toBe(401);
    expectGraphQLError(response, 'UNAUTHENTICATED');
    await expectKeyWorks(spare, 'pavel');
  });

  it("another user's key is NOT_FOUND, and that key still works", async () => {
    const owner = await t.createUser('quinn');
    const attacker = await t.createUser('rita');
    const response = await t.gql(KeysDelete, { apiKey: owner.apiKey }, attacker.apiKey);
    expect(response.data).toBeNull();
    expect(expectGraphQLError(response, 'NOT_FOUND').message).toMatch(/api key not found/i);
    await expectKeyWorks(owner.apiKey, 'quinn');
    await expectKeyWorks(attacker.apiKey, 'rita');
  });

  it('deleting the same key twice: the second time is NOT_FOUND', async () => {
    const user = await t.createUser('sven');
    const second = await extraKey(user.id);
    expect(expectData(await t.gql(KeysDelete, { apiKey: second }, user.apiKey)).deleteApiKey).toBe(true);
    expectGraphQLError(await t.gql(KeysDelete, { apiKey: second }, user.apiKey), 'NOT_FOUND');
  });

  it('a right id with a wrong secret is NOT_FOUND, and the real key survives', async () => {
    const user = await t.createUser('tara');
    const second = await extraKey(user.id);
    const forged = second.slice(0, -1) + (second.endsWith('A') ? 'B' : 'A');
    expectGraphQLError(await t.gql(KeysDelete, { apiKey: forged }, user.apiKey), 'NOT_FOUND');
    await expectKeyWorks(second, 'tara');
  });

  it.each([
    ['a malformed key', 'definitely-not-a-key'],
    ['a well-formed key that does not exist', `pk_${'Z'.repeat(16)}_${'y'.repeat(43)}`],
  ])('%s is NOT_FOUND', async (_name, apiKey) => {
    const user = await t.createUser();
    expectGraphQLError(await t.gql(KeysDelete, { apiKey }, user.apiKey), 'NOT_FOUND');
    await expectKeyWorks(user.apiKey, user.username);
  });

  it('an empty key is BAD_USER_INPUT naming apiKey', async () => {
    const user = await t.createUser();
    const response = await t.gql(KeysDelete, { apiKey: '' }, user.apiKey);
    expect(response.data).toBeNull();
    expect(expectGraphQLError(response, 'BAD_USER_INPUT').message).toMatch(/apiKey/);
    await expectKeyWorks(user.apiKey, user.username);
  });
});

// What is the caller's own: their profile and balances, their agents, their agents' deployments and triggers.
describe('me', () => {
  it('is the key owner: username, type USER, zero balances, own account details', async () => {
    const erin = await t.createUser('erin');
    expect(expectData(await t.gql(MeProfile, {}, erin.apiKey)).me).toEqual({
      rawId: erin.id,
      username: 'erin',
      type: 'USER',
      balance: 0,
      subscriptionBalance: 0,
      foreverBalance: 0,
      subscriptionTier: 'free',
      featureFlags: [],
      agentProfile: null,
    });
  });

  it('balance is subscription plus forever manna after credits', async () => {
    const frank = await t.createUser('frank');
    await t.db.$transaction(async (tx) => {
      await credit(tx, { userId: frank.id, kind: 'subscription', amount: '12.5', reason: 'monthly grant' });
      await credit(tx, { userId: frank.id, kind: 'forever', amount: '7.25', reason: 'purchase' });
      await credit(tx, { userId: frank.id, kind: 'forever', amount: '0.1', reason: 'bonus' });
    });
    const me = expectData(await t.gql(MeProfile, {}, frank.apiKey)).me;
    expect(me.subscriptionBalance).toBe(12.5);
    expect(me.foreverBalance).toBeCloseTo(7.35, 10);
    expect(me.balance).toBeCloseTo(19.85, 10);
  });

  it("balances and account details are null on another creator's profile", async () => {
    const gina = await t.createUser('gina');
    const hank = await t.createUser('hank');
    await t.db.$transaction((tx) => credit(tx, { userId: gina.id, kind: 'forever', amount: '50', reason: 'purchase' }));
    const agent = await f.agent(gina, { public: true });

    const seenByHank = expectData(await t.gql(MeOwnerOfAgent, { id: agent.id }, hank.apiKey)).agent;
    expect(seenByHank.owner).toEqual({
      username: 'gina',
      balance: null,
      subscriptionBalance: null,
      foreverBalance: null,
      subscriptionTier: null,
      featureFlags: null,
    });
    expect(seenByHank.creator.balance).toBeNull();

    // The same path for the owner shows her own balance.
    const seenByGina = expectData(await t.gql(MeOwnerOfAgent, { id: agent.id }, gina.apiKey)).agent;
    expect(seenByGina.owner).toMatchObject({ username: 'gina', balance: 50, foreverBalance: 50, subscriptionTier: 'free' });
  });

  it('me.agents paginates with first/after and shows your private agents, newest first', async () => {
    const ivy = await t.createUser('ivy');
    const other = await t.createUser('ivy-neighbour');
    const created = [];
    for (let i = 0; i < 5; i++) created.push(await f.agent(ivy, { public: i % 2 === 0 }));
    await f.agent(other, { public: true });

    const seen: { rawId: string; public: boolean; createdAt: string }[] = [];
    let after: string | null = null;
    const pages: number[] = [];
    for (let guard = 0; guard < 5; guard++) {
      const page: {
        edges: { cursor: string; node: { rawId: string; public: boolean; createdAt: string } }[];
        pageInfo: { hasNextPage: boolean; endCursor?: string | null };
      } = expectData(await t.gql(MeAgentsPage, { first: 2, after }, ivy.apiKey)).me.agents;
      pages.push(page.edges.length);
      seen.push(...page.edges.map((e) => e.node));
      expect(page.pageInfo.endCursor).toBe(page.edges.at(-1)?.cursor);
      if (!page.pageInfo.hasNextPage) break;
      after = page.pageInfo.endCursor!;
    }
    expect(pages).toEqual([2, 2, 1]);
    expect(seen.map((a) => a.rawId).sort()).toEqual(created.map((a) => a.id).sort());
    expect(seen.filter((a) => !a.public)).toHaveLength(2);
    const times = seen.map((a) => Date.parse(a.createdAt));
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it("another creator's agents list only the public ones", async () => {
    const jo = await t.createUser('jo');
    const kim = await t.createUser('kim');
    const pub = await f.agent(jo, { public: true });
    await f.agent(jo, { public: false });
    await f.agent(jo, { public: false });

    const owner = expectData(await t.gql(MeAgentsOfOwner, { id: pub.id }, kim.apiKey)).agent.owner;
    expect(owner.username).toBe('jo');
    expect(owner.agents.edges.map((e) => e.node.rawId)).toEqual([pub.id]);

    const own = expectData(await t.gql(MeAgentsOfOwner, { id: pub.id }, jo.apiKey)).agent.owner;
    expect(own.agents.edges).toHaveLength(3);
  });
});

describe('deployments and triggers', () => {
  let lea: TestUser;
  let max: TestUser;
  let leaAgents: string[];
  let secrets: string[];

  beforeAll(async () => {
    lea = await t.createUser('lea');
    max = await t.createUser('max');
    const a1 = await f.agent(lea, { public: true });
    const a2 = await f.agent(lea, { public: false });
    const m1 = await f.agent(max, { public: true });
    leaAgents = [a1.id, a2.id];
    await f.deployment(a1.id, lea.id, 'discord');
    await f.deployment(a2.id, lea.id, 'telegram');
    await f.deployment(m1.id, max.id, 'discord');
    // The client omits secrets unless asked; the test asks, to know what must never come back.
    const rows = await t.db.deployment.findMany({ where: { userId: { in: [lea.id, max.id] } }, omit: { secrets: false } });
    secrets = rows.map((d) => (d.secrets as { bot_token?: string } | null)?.bot_token ?? '');
    expect(secrets).toHaveLength(3);
    expect(secrets.every((s) => s.startsWith('secret-'))).toBe(true);
    await f.trigger(a1.id, lea.id);
    await f.trigger(a2.id, lea.id);
    await f.trigger(m1.id, max.id);
  });

  it("deployments lists only the caller's agents' deployments, newest first", async () => {
    const deployments = expectData(await t.gql(MeDeployments, {}, lea.apiKey)).deployments;
    expect(deployments).toHaveLength(2);
    expect(deployments.map((d) => d.agent.rawId).sort()).toEqual([...leaAgents].sort());
    expect(deployments.map((d) => d.platform).sort()).toEqual(['DISCORD', 'TELEGRAM']);
    expect(deployments.every((d) => d.owner.username === 'lea' && d.valid === true)).toBe(true);
    expect(deployments[0]!.config).toEqual({ channel: 'general' });
    const times = deployments.map((d) => Date.parse(d.createdAt));
    expect(times).toEqual([...times].sort((a, b) => b - a));

    const maxs = expectData(await t.gql(MeDeployments, {}, max.apiKey)).deployments;
    expect(maxs).toHaveLength(1);
    expect(maxs[0]!.owner.username).toBe('max');
  });

  it('a caller without agents has no deployments or triggers', async () => {
    const nia = await t.createUser('nia');
    expect(expectData(await t.gql(MeDeployments, {}, nia.apiKey)).deployments).toEqual([]);
    expect(expectData(await t.gql(MeTriggers, {}, nia.apiKey)).triggers).toEqual([]);
  });

  it('the Deployment type has no secrets field, and asking for one is a validation error', async () => {
    const type = expectData(await t.gql(MeDeploymentType, {}, lea.apiKey)).__type;
    const fields = type!.fields!.map((field) => field.name);
    expect(fields).toContain('config');
    expect(fields.filter((name) => /secret/i.test(name))).toEqual([]);

    const asked = await postRaw(t, { query: '{ deployments { id secrets } }' }, lea.apiKey);
    expect([200, 400]).toContain(asked.status);
    expect(asked.json.data ?? null).toBeNull();
    expect(asked.json.errors[0].message).toMatch(/secrets/);
    for (const secret of secrets) expect(asked.text).not.toContain(secret);
  });

  it('the raw HTTP response never contains a secret', async () => {
    for (const key of [lea.apiKey, max.apiKey]) {
      const { status, text } = await postDocument(t, MeDeployments, {}, key);
      expect(status).toBe(200);
      expect(text).toContain('"deployments"');
      for (const secret of secrets) expect(text).not.toContain(secret);
      expect(text).not.toContain('bot_token');
    }
  });

  it("triggers lists only the caller's agents' triggers, with their fields", async () => {
    const triggers = expectData(await t.gql(MeTriggers, {}, lea.apiKey)).triggers;
    expect(triggers).toHaveLength(2);
    expect(triggers.map((tr) => tr.agent.rawId).sort()).toEqual([...leaAgents].sort());
    for (const trigger of triggers) {
      expect(trigger).toMatchObject({
        cron: '0 9 * * *',
        timezone: 'Europe/Paris',
        triggerPrompt: 'Say good morning',
        status: 'ACTIVE',
        lastRun: null,
        nextRun: expect.stringMatching(/T0[78]:00:00\.000Z$/),
        session: null,
        owner: { username: 'lea' },
      });
    }
    const times = triggers.map((tr) => Date.parse(tr.createdAt));
    expect(times).toEqual([...times].sort((a, b) => b - a));

    const maxs = expectData(await t.gql(MeTriggers, {}, max.apiKey)).triggers;
    expect(maxs).toHaveLength(1);
    expect(maxs[0]!.owner.username).toBe('max');
  });
});
