import { beforeEach, describe, expect, it, beforeAll } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError, postRaw } from './support.ts';
import type { DiscoverAgentsQueryVariables } from './generated/graphql.ts';
import { expectError, expectRejectsBadKeys, isoDate, creatorRef } from '../helpers/rest-helpers.ts';
import { settledSession } from '../helpers/sessions.ts';
import { credit } from '../../src/domain/manna/stores/ledger.ts';

/**
 * Agents and creators on the wire: GraphQL, its discovery lists, then REST, deleting an agent and
 * the caller's creator profile (the rules: test/rules/agents.test.ts). One file for the domain's
 * transports. The discovery lists and the creator profile start apps of their own: the lists
 * count every agent, and the profile's tests make users the other parts have.
 */

graphql(`
  fragment AgentsAgentFields on Agent {
    id
    rawId
    key
    name
    description
    image
    public
    persona
    isPersonaPublic
    greeting
    knowledge
    voice
    ownerPays
    tools
    llmSettings { modelProfile thinkingPolicy thinkingEffortCap thinkingEffortInstructions }
    models { lora useWhen }
    suggestions { label prompt }
    owner { id rawId username type }
    creator { id rawId username type }
    createdAt
    updatedAt
  }
`);

const AgentsGet = graphql(`
  query AgentsGet($id: ID!) {
    agent(id: $id) { ...AgentsAgentFields }
  }
`);
const AgentsCreate = graphql(`
  mutation AgentsCreate($input: CreateAgentInput!) {
    createAgent(input: $input) { ...AgentsAgentFields }
  }
`);
const AgentsUpdate = graphql(`
  mutation AgentsUpdate($id: ID!, $input: UpdateAgentInput!) {
    updateAgent(id: $id, input: $input) { ...AgentsAgentFields }
  }
`);
const AgentsSetApproval = graphql(`
  mutation AgentsSetApproval($id: ID!, $input: UpdateAgentInput!) {
    updateAgent(id: $id, input: $input) { id toolApproval { rules { tool always aboveManna } timeoutSeconds } }
  }
`);
const AgentsCreateWithApproval = graphql(`
  mutation AgentsCreateWithApproval($input: CreateAgentInput!) {
    createAgent(input: $input) { id toolApproval { rules { tool always aboveManna } timeoutSeconds } }
  }
`);
const AgentsThroughCreation = graphql(`
  query AgentsThroughCreation($id: ID!) {
    creation(id: $id) {
      id
      agent { id rawId name knowledge persona }
      creator { username agentProfile { id name knowledge } }
    }
  }
`);
const AgentsThroughConcept = graphql(`
  query AgentsThroughConcept($id: ID!) {
    concept(id: $id) { id agent { id name knowledge } }
  }
`);

/** The app that agents over GraphQL, over REST, and their deletion share: each test makes agents of its own. */
let t: TestApp;
let alice: TestUser;
let bob: TestUser;
let f: ReturnType<typeof fixtures>;

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  f = fixtures(t);
});

describe('agents over GraphQL', () => {
  let keySeq = 0;
  const newKey = () => `agent-key-${++keySeq}`;

  async function readAgent(id: string, key = alice.apiKey) {
    return expectData(await t.gql(AgentsGet, { id }, key)).agent;
  }

  describe('agent(id)', () => {
    it('returns every field, with owner, creator, llmSettings, models and suggestions', async () => {
      const model = await f.model(alice, { name: 'Portrait LoRA' });
      const agent = await f.agent(alice, {
        key: 'ada-bot',
        name: 'Ada',
        description: 'Answers questions about engines',
        image: 'https://cdn.example.com/ada.png',
        public: true,
        persona: 'Victorian mathematician',
        isPersonaPublic: true,
        greeting: 'Good day',
        knowledge: 'Notes on the analytical engine',
        voice: 'en-GB-1',
        ownerPays: 'full',
        tools: { flux_dev: true, flux_schnell: false },
        llmSettings: { modelProfile: 'high', thinkingPolicy: 'always' },
        models: [{ lora: model.id, useWhen: 'for portraits' }],
        suggestions: [{ label: 'Hello', prompt: 'Say hello' }],
      });

      const read = await readAgent(agent.id);
      expect(read).toMatchObject({
        rawId: agent.id,
        key: 'ada-bot',
        name: 'Ada',
        description: 'Answers questions about engines',
        image: 'https://cdn.example.com/ada.png',
        public: true,
        persona: 'Victorian mathematician',
        isPersonaPublic: true,
        greeting: 'Good day',
        knowledge: 'Notes on the analytical engine',
        voice: 'en-GB-1',
        ownerPays: 'FULL',
        tools: { flux_dev: true, flux_schnell: false },
        llmSettings: { modelProfile: 'high', thinkingPolicy: 'always', thinkingEffortCap: null, thinkingEffortInstructions: null },
        models: [{ lora: model.id, useWhen: 'for portraits' }],
        suggestions: [{ label: 'Hello', prompt: 'Say hello' }],
        owner: { rawId: alice.id, username: 'alice', type: 'USER' },
        creator: { rawId: agent.id, username: 'ada-bot', type: 'AGENT' },
      });
      expect(new Date(read.createdAt).toISOString()).toBe(read.createdAt);

      // Another user sees the same public agent.
      expect(await readAgent(agent.id, bob.apiKey)).toEqual(read);
    });

    it("another user's private agent is FORBIDDEN; the owner reads it", async () => {
      const agent = await f.agent(alice, { public: false, knowledge: 'private notes' });
      const response = await t.gql(AgentsGet, { id: agent.id }, bob.apiKey);
      expect(response.status).toBe(200);
      expect(response.data).toBeNull();
      expectGraphQLError(response, 'FORBIDDEN');
      expect(JSON.stringify(response)).not.toContain('private notes');
      expect((await readAgent(agent.id)).knowledge).toBe('private notes');
    });

    it('an unknown id is NOT_FOUND', async () => {
      const response = await t.gql(AgentsGet, { id: '00000000-0000-7000-8000-000000000000' }, alice.apiKey);
      expect(expectGraphQLError(response, 'NOT_FOUND').path).toEqual(['agent']);
      expect(response.data).toBeNull();
    });
  });

  describe('private agents through relations', () => {
    it('a public creation does not reveal its private agent to other users', async () => {
      const agent = await f.agent(alice, { public: false, name: 'Hidden helper', knowledge: 'TOP-SECRET-KNOWLEDGE' });
      const creation = await f.creation(alice, { agentId: agent.id, public: true });

      const own = expectData(await t.gql(AgentsThroughCreation, { id: creation.id }, alice.apiKey));
      expect(own.creation.agent).toMatchObject({ rawId: agent.id, knowledge: 'TOP-SECRET-KNOWLEDGE' });

      const response = await t.gql(AgentsThroughCreation, { id: creation.id }, bob.apiKey);
      expect(JSON.stringify(response)).not.toContain('TOP-SECRET-KNOWLEDGE');
      expect(response.data?.creation?.agent ?? null).toBeNull();
    });

    it("a public creation made by a private agent does not reveal the agent's profile", async () => {
      const agent = await f.agent(alice, { public: false, knowledge: 'PROFILE-SECRET' });
      const creation = await t.db.creation.create({
        data: {
          userId: agent.id,
          agentId: agent.id,
          tool: 'flux_dev',
          name: 'By the agent',
          url: 'https://cdn.example.com/b.png',
          public: true,
          args: {},
        },
      });
      const response = await t.gql(AgentsThroughCreation, { id: creation.id }, bob.apiKey);
      expect(JSON.stringify(response)).not.toContain('PROFILE-SECRET');
      expect(response.data?.creation?.creator?.agentProfile ?? null).toBeNull();
    });

    it('a public concept does not reveal its private agent to other users', async () => {
      const agent = await f.agent(alice, { public: false, knowledge: 'CONCEPT-AGENT-SECRET' });
      const concept = await f.concept(alice, { agent: agent.id });
      await t.db.concept.update({ where: { id: concept.id }, data: { public: true } });

      const response = await t.gql(AgentsThroughConcept, { id: concept.id }, bob.apiKey);
      expect(JSON.stringify(response)).not.toContain('CONCEPT-AGENT-SECRET');
      expect(response.data?.concept?.agent ?? null).toBeNull();
    });
  });

  describe('createAgent', () => {
    it('creates an agent with defaults, owned by the caller, then readable', async () => {
      const key = newKey();
      const created = expectData(await t.gql(AgentsCreate, { input: { name: 'Fresh', key } }, alice.apiKey)).createAgent;
      expect(created).toMatchObject({
        key,
        name: 'Fresh',
        description: '',
        public: false,
        persona: '',
        isPersonaPublic: false,
        ownerPays: 'OFF',
        tools: {},
        models: [],
        suggestions: [],
        llmSettings: { modelProfile: null, thinkingPolicy: null, thinkingEffortCap: null, thinkingEffortInstructions: null },
        owner: { username: 'alice' },
        creator: { username: key, type: 'AGENT' },
      });
      expect(await readAgent(created.id)).toEqual(created);
      // Private by default: another user may not read it.
      expectGraphQLError(await t.gql(AgentsGet, { id: created.id }, bob.apiKey), 'FORBIDDEN');
    });

    it('takes every input field, with UPPER_CASE enums', async () => {
      const key = newKey();
      const created = expectData(
        await t.gql(
          AgentsCreate,
          {
            input: {
              name: 'Full',
              key,
              public: true,
              description: 'd',
              persona: 'p',
              isPersonaPublic: true,
              greeting: 'hi',
              knowledge: 'k',
              voice: 'v',
              ownerPays: 'DEPLOYMENTS',
              tools: { flux_dev: true },
              llmSettings: {
                modelProfile: 'LOW',
                thinkingPolicy: 'AUTO',
                thinkingEffortCap: 'MEDIUM',
                thinkingEffortInstructions: 'think briefly',
              },
              suggestions: [{ label: 'A', prompt: 'B' }],
            },
          },
          alice.apiKey,
        ),
      ).createAgent;
      expect(created).toMatchObject({
        public: true,
        ownerPays: 'DEPLOYMENTS',
        tools: { flux_dev: true },
        llmSettings: {
          modelProfile: 'low',
          thinkingPolicy: 'auto',
          thinkingEffortCap: 'medium',
          thinkingEffortInstructions: 'think briefly',
        },
        suggestions: [{ label: 'A', prompt: 'B' }],
      });
      expect((await readAgent(created.id, bob.apiKey)).name).toBe('Full');
    });

    it('a key that is already taken is CONFLICT, and nothing is created', async () => {
      const key = newKey();
      expectData(await t.gql(AgentsCreate, { input: { name: 'First', key } }, alice.apiKey));
      const before = await t.db.agent.count();

      const again = await t.gql(AgentsCreate, { input: { name: 'Second', key } }, bob.apiKey);
      expect(again.data).toBeNull();
      expect(expectGraphQLError(again, 'CONFLICT').message).toMatch(/already exists/);

      // A user's name is taken too: agents and users share the creator namespace.
      expectGraphQLError(await t.gql(AgentsCreate, { input: { name: 'Impostor', key: 'bob' } }, alice.apiKey), 'CONFLICT');
      expect(await t.db.agent.count()).toBe(before);
      expect(await t.db.agent.count({ where: { name: { in: ['Second', 'Impostor'] } } })).toBe(0);
    });

    it.each([
      ['a name over 100 characters', { name: 'x'.repeat(101) }, 'name'],
      ['an unknown tool', { tools: { no_such_tool: true } }, 'tools.no_such_tool'],
    ])('%s is BAD_USER_INPUT naming the field, and nothing is created', async (_name, fields, field) => {
      const before = await t.db.agent.count();
      const response = await t.gql(AgentsCreate, { input: { name: 'Valid name', key: newKey(), ...fields } }, alice.apiKey);
      expect(response.data).toBeNull();
      expect(expectGraphQLError(response, 'BAD_USER_INPUT').extensions?.field).toBe(field);
      expect(await t.db.agent.count()).toBe(before);
    });
  });

  describe('updateAgent', () => {
    let agentId: string;
    let modelId: string;

    beforeEach(async () => {
      modelId = (await f.model(alice)).id;
      const agent = await f.agent(alice, {
        name: 'Before',
        description: 'Original description',
        persona: 'Original persona',
        greeting: 'Hello',
        tools: { flux_dev: true },
        llmSettings: { modelProfile: 'high', thinkingPolicy: 'always' },
        models: [{ lora: modelId, useWhen: 'always' }],
        suggestions: [{ label: 'L', prompt: 'P' }],
        ownerPays: 'full',
      });
      agentId = agent.id;
    });

    const withoutUpdatedAt = <T extends { updatedAt: string }>({ updatedAt: _u, ...rest }: T) => rest;

    it('changes only the fields given', async () => {
      const before = await readAgent(agentId);
      const updated = expectData(
        await t.gql(AgentsUpdate, { id: agentId, input: { name: 'After', public: false } }, alice.apiKey),
      ).updateAgent;
      expect(withoutUpdatedAt(updated)).toEqual({ ...withoutUpdatedAt(before), name: 'After', public: false });
      expect(withoutUpdatedAt(await readAgent(agentId))).toEqual(withoutUpdatedAt(updated));
    });

    it('merges llmSettings field by field', async () => {
      const first = expectData(
        await t.gql(AgentsUpdate, { id: agentId, input: { llmSettings: { thinkingEffortCap: 'MEDIUM' } } }, alice.apiKey),
      );
      expect(first.updateAgent.llmSettings).toEqual({
        modelProfile: 'high',
        thinkingPolicy: 'always',
        thinkingEffortCap: 'medium',
        thinkingEffortInstructions: null,
      });

      const second = expectData(
        await t.gql(
          AgentsUpdate,
          { id: agentId, input: { llmSettings: { thinkingPolicy: 'OFF', thinkingEffortInstructions: 'short' } } },
          alice.apiKey,
        ),
      );
      expect(second.updateAgent.llmSettings).toEqual({
        modelProfile: 'high',
        thinkingPolicy: 'off',
        thinkingEffortCap: 'medium',
        thinkingEffortInstructions: 'short',
      });

      // An update without llmSettings leaves them alone.
      expectData(await t.gql(AgentsUpdate, { id: agentId, input: { greeting: 'Hi again' } }, alice.apiKey));
      expect((await readAgent(agentId)).llmSettings).toEqual(second.updateAgent.llmSettings);
    });

    it('replaces lists and maps that are given (models, suggestions, tools) and changes the key', async () => {
      const otherModel = await f.model(bob, { public: true });
      const key = newKey();
      const updated = expectData(
        await t.gql(
          AgentsUpdate,
          {
            id: agentId,
            input: {
              key,
              models: [{ lora: otherModel.id }],
              suggestions: [],
              tools: { flux_schnell: true },
              ownerPays: 'OFF',
              voice: 'alto',
            },
          },
          alice.apiKey,
        ),
      ).updateAgent;
      expect(updated).toMatchObject({
        key,
        creator: { username: key },
        models: [{ lora: otherModel.id, useWhen: '' }],
        suggestions: [],
        tools: { flux_schnell: true },
        ownerPays: 'OFF',
        voice: 'alto',
        name: 'Before',
        description: 'Original description',
      });
      expect(withoutUpdatedAt(await readAgent(agentId))).toEqual(withoutUpdatedAt(updated));
    });

    // Which values each field takes is the agents' rule (test/rules/agents.test.ts, "what an agent’s
    // fields may be"); here, how GraphQL tells a refusal: its code, and the field as a dotted path.
    it.each([
      ['a name over 100 characters', { name: 'n'.repeat(101) }, 'name'],
      [
        '11 models (over a limit, still an input error here)',
        { models: Array.from({ length: 11 }, () => ({ lora: 'placeholder' })) },
        'models',
      ],
      ['a model that does not exist', { models: [{ lora: 'no-such-model' }] }, 'models.0.lora'],
    ])('%s is BAD_USER_INPUT naming the field, and nothing changes', async (_name, input, field) => {
      const before = await readAgent(agentId);
      // Keep a valid change alongside, to prove the whole update is refused.
      const response = await t.gql(AgentsUpdate, { id: agentId, input: { description: 'should not stick', ...input } }, alice.apiKey);
      expect(response.data).toBeNull();
      const error = expectGraphQLError(response, 'BAD_USER_INPUT');
      expect(error.extensions?.field).toBe(field);
      expect(error.message).toContain(field.split('.')[0]);
      expect(await readAgent(agentId)).toEqual(before);
    });

    it('sets toolApproval: a rule without aboveManna asks always, rules are replaced whole, the timeout kept unless given', async () => {
      const made = expectData(
        await t.gql(AgentsCreateWithApproval, { input: { name: 'Careful', key: newKey() } }, alice.apiKey),
      ).createAgent;
      expect(made.toolApproval).toEqual({ rules: [], timeoutSeconds: 600 });
      const set = expectData(
        await t.gql(
          AgentsSetApproval,
          {
            id: agentId,
            input: { toolApproval: { rules: [{ tool: 'flux_dev', aboveManna: 1.5 }, { tool: 'flux_schnell' }], timeoutSeconds: 45 } },
          },
          alice.apiKey,
        ),
      ).updateAgent;
      expect(set.toolApproval).toEqual({
        rules: [
          { tool: 'flux_dev', always: false, aboveManna: 1.5 },
          { tool: 'flux_schnell', always: true, aboveManna: null },
        ],
        timeoutSeconds: 45,
      });
      const replaced = expectData(
        await t.gql(AgentsSetApproval, { id: agentId, input: { toolApproval: { rules: [{ tool: 'kokoro_tts' }] } } }, alice.apiKey),
      ).updateAgent;
      expect(replaced.toolApproval).toEqual({ rules: [{ tool: 'kokoro_tts', always: true, aboveManna: null }], timeoutSeconds: 45 });
    });

    it.each([
      ['a tool that does not exist', { rules: [{ tool: 'teleport' }] }, 'toolApproval.tools.teleport'],
      ['a negative amount', { rules: [{ tool: 'flux_dev', aboveManna: -1 }] }, 'toolApproval.tools.flux_dev.above'],
      ['a timeout under 5 s', { timeoutSeconds: 2 }, 'toolApproval.timeoutSeconds'],
    ])('toolApproval with %s is BAD_USER_INPUT naming the field, and nothing changes', async (_name, toolApproval, field) => {
      const before = await readAgent(agentId);
      const response = await t.gql(
        AgentsSetApproval,
        { id: agentId, input: { description: 'should not stick', toolApproval } },
        alice.apiKey,
      );
      expect(expectGraphQLError(response, 'BAD_USER_INPUT').extensions?.field).toBe(field);
      expect(await readAgent(agentId)).toEqual(before);
    });

    it('an empty input is BAD_USER_INPUT', async () => {
      const before = await readAgent(agentId);
      expectGraphQLError(await t.gql(AgentsUpdate, { id: agentId, input: {} }, alice.apiKey), 'BAD_USER_INPUT');
      expect(await readAgent(agentId)).toEqual(before);
    });

    it('input errors carry the path and location of the mutation, like every other field error', async () => {
      const response = await t.gql(AgentsUpdate, { id: agentId, input: { name: 'n'.repeat(101) } }, alice.apiKey);
      const error = expectGraphQLError(response, 'BAD_USER_INPUT');
      expect(error.extensions?.field).toBe('name');
      expect(error.path).toEqual(['updateAgent']);
      expect((error as { locations?: unknown[] }).locations).toHaveLength(1);
    });

    it('a key taken by another agent is CONFLICT, and nothing changes', async () => {
      const other = await f.agent(bob);
      const otherKey = (await readAgent(other.id, bob.apiKey)).key;
      const before = await readAgent(agentId);
      const response = await t.gql(AgentsUpdate, { id: agentId, input: { key: otherKey, name: 'Renamed' } }, alice.apiKey);
      expect(response.data).toBeNull();
      expectGraphQLError(response, 'CONFLICT');
      expect(await readAgent(agentId)).toEqual(before);
    });

    it('a non-owner is FORBIDDEN, even on a public agent, and nothing changes', async () => {
      const before = await readAgent(agentId);
      expect(before.public).toBe(true);
      const response = await t.gql(AgentsUpdate, { id: agentId, input: { name: 'Taken over' } }, bob.apiKey);
      expect(response.data).toBeNull();
      expectGraphQLError(response, 'FORBIDDEN');
      expect(await readAgent(agentId)).toEqual(before);
    });

    it('an unknown id is NOT_FOUND', async () => {
      const response = await t.gql(AgentsUpdate, { id: 'missing-agent', input: { name: 'x' } }, alice.apiKey);
      expect(response.data).toBeNull();
      expectGraphQLError(response, 'NOT_FOUND');
    });

    it('an unknown enum value is rejected by GraphQL validation, and nothing changes', async () => {
      const before = await readAgent(agentId);

      const inline = await postRaw(
        t,
        { query: `mutation { updateAgent(id: "${agentId}", input: { name: "Changed", llmSettings: { modelProfile: ULTRA } }) { id } }` },
        alice.apiKey,
      );
      expect([200, 400]).toContain(inline.status);
      expect(inline.json.data ?? null).toBeNull();
      expect(inline.json.errors[0].message).toMatch(/ULTRA.*ModelProfile/);
      expect(inline.text).not.toMatch(/stack|prisma/i);

      // The same through variables: the typed document cannot express it, so the value is cast.
      const viaVariables = await t.gql(
        AgentsUpdate,
        { id: agentId, input: { name: 'Changed', ownerPays: 'SOMETIMES' as never } },
        alice.apiKey,
      );
      expect(viaVariables.data ?? null).toBeNull();
      expect(viaVariables.errors?.[0]?.message).toMatch(/SOMETIMES.*OwnerPays/);

      // A lowercase value (the domain's spelling) is not a GraphQL enum value either.
      const lowercase = await t.gql(
        AgentsUpdate,
        { id: agentId, input: { name: 'Changed', llmSettings: { thinkingPolicy: 'always' as never } } },
        alice.apiKey,
      );
      expect(lowercase.data ?? null).toBeNull();
      expect(lowercase.errors?.length).toBeGreaterThan(0);

      expect(await readAgent(agentId)).toEqual(before);
    });
  });
});

const DiscoverAgents = graphql(`
  query DiscoverAgents($filter: AgentFilter, $first: Int, $after: String, $last: Int, $before: String) {
    agents(filter: $filter, first: $first, after: $after, last: $last, before: $before) {
      edges { cursor node { id rawId name public owner { id } } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
`);
const DiscoverModels = graphql(`
  query DiscoverModels($filter: ModelFilter, $first: Int, $after: String, $last: Int, $before: String) {
    models(filter: $filter, first: $first, after: $after, last: $last, before: $before) {
      edges { cursor node { id rawId name public baseModel } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
`);
const DiscoverCreations = graphql(`
  query DiscoverCreations($filter: CreationFilter, $first: Int, $after: String, $last: Int, $before: String) {
    creations(filter: $filter, first: $first, after: $after, last: $last, before: $before) {
      edges { cursor node { id rawId name public toolKey } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
`);

describe('discovery lists over GraphQL: agents, models, creations', () => {
  let t: TestApp;
  let alice: TestUser;
  let bob: TestUser;
  let f: ReturnType<typeof fixtures>;
  /** Ids in the order they were made (oldest first). */
  const agents: Record<string, string> = {};
  const globalId = (type: string, id: string) => Buffer.from(`${type}:${id}`).toString('base64');
  const tick = () => new Promise((r) => setTimeout(r, 3));

  setUp(async (start) => {
    t = await start.app();
    alice = await t.createUser('alice');
    bob = await t.createUser('bob');
    f = fixtures(t);
    const made: [string, TestUser, Record<string, unknown>][] = [
      ['alicePublic', alice, { name: 'Lighthouse Keeper', public: true }],
      ['alicePrivate', alice, { name: 'Diary', public: false, description: 'keeps my SECRETS' }],
      ['bobPublic', bob, { name: 'Chess Coach', public: true, key: 'grandmaster-bob' }],
      ['bobPrivate', bob, { name: 'Bob Private Lighthouse', public: false }],
      ['bobPublic2', bob, { name: 'Poet', public: true }],
    ];
    for (const [name, owner, fields] of made) {
      agents[name] = (await f.agent(owner, fields)).id;
      await tick();
    }
  });

  type Page = { edges: { cursor: string; node: { rawId: string } }[]; pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean } };

  /** Every id of a connection, paging forward with `first: size` until the end. */
  async function forward(run: (v: { first: number; after?: string }) => Promise<Page>, size = 2) {
    const ids: string[] = [];
    let after: string | undefined;
    for (let guard = 0; guard < 50; guard++) {
      const page = await run({ first: size, after });
      ids.push(...page.edges.map((e) => e.node.rawId));
      if (!page.pageInfo.hasNextPage) return ids;
      after = page.edges.at(-1)!.cursor;
    }
    throw new Error('paging did not end');
  }
  /** The same, backward with `last: size` and `before`, returned in the connection's order. */
  async function backward(run: (v: { last: number; before?: string }) => Promise<Page>, size = 2) {
    const pages: string[][] = [];
    let before: string | undefined;
    for (let guard = 0; guard < 50; guard++) {
      const page = await run({ last: size, before });
      pages.unshift(page.edges.map((e) => e.node.rawId));
      if (!page.pageInfo.hasPreviousPage) return pages.flat();
      before = page.edges[0]!.cursor;
    }
    throw new Error('paging did not end');
  }

  describe('agents', () => {
    const list = async (variables: DiscoverAgentsQueryVariables, key = alice.apiKey) =>
      expectData(await t.gql(DiscoverAgents, variables, key)).agents;

    it("lists the viewer's own and public agents newest first, never a stranger's private one", async () => {
      const ids = (await list({})).edges.map((e) => e.node.rawId);
      expect(ids).toEqual([agents.bobPublic2, agents.bobPublic, agents.alicePrivate, agents.alicePublic]);
      const bobs = (await list({}, bob.apiKey)).edges.map((e) => e.node.rawId);
      expect(bobs).toEqual([agents.bobPublic2, agents.bobPrivate, agents.bobPublic, agents.alicePublic]);
    });

    it('pages forward and backward over the same list', async () => {
      const all = (await list({})).edges.map((e) => e.node.rawId);
      expect(await forward((v) => list(v))).toEqual(all);
      expect(await forward((v) => list(v), 3)).toEqual(all);
      expect(await backward((v) => list(v))).toEqual(all);
      const firstTwo = await list({ first: 2 });
      expect(firstTwo.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    });

    it('filters by text (name, key, description; any case), owner (raw or global id) and public', async () => {
      const ids = async (filter: object, key = alice.apiKey) => (await list({ filter }, key)).edges.map((e) => e.node.rawId);
      expect(await ids({ text: 'lighthouse' })).toEqual([agents.alicePublic]);
      expect(await ids({ text: 'LIGHTHOUSE' }, bob.apiKey)).toEqual([agents.bobPrivate, agents.alicePublic]);
      expect(await ids({ text: 'grandMASTER' })).toEqual([agents.bobPublic]);
      expect(await ids({ text: 'secrets' })).toEqual([agents.alicePrivate]);
      expect(await ids({ text: 'secrets' }, bob.apiKey)).toEqual([]);
      expect(await ids({ owner: bob.id })).toEqual([agents.bobPublic2, agents.bobPublic]);
      expect(await ids({ owner: globalId('Creator', bob.id) })).toEqual([agents.bobPublic2, agents.bobPublic]);
      expect(await ids({ public: false })).toEqual([agents.alicePrivate]);
      expect(await ids({ public: false, owner: bob.id })).toEqual([]);
      expect(await ids({ public: true })).toEqual([agents.bobPublic2, agents.bobPublic, agents.alicePublic]);
    });

    it('refuses crafted cursors and contradictory paging as BAD_USER_INPUT', async () => {
      const forged = Buffer.from('GPC:N:1').toString('base64');
      const crafted: DiscoverAgentsQueryVariables[] = [
        { after: 'not-a-cursor', first: 1 },
        { after: forged, first: 1 },
        { before: Buffer.from('GPC:J:{"a":1}').toString('base64'), last: 1 },
      ];
      for (const variables of crafted) {
        expect(expectGraphQLError(await t.gql(DiscoverAgents, variables, alice.apiKey), 'BAD_USER_INPUT').message).toBe('Invalid cursor');
      }
      expectGraphQLError(await t.gql(DiscoverAgents, { first: -1 }, alice.apiKey), 'BAD_USER_INPUT');
      expectGraphQLError(
        await t.gql(DiscoverAgents, { first: 1, last: 1, after: (await list({ first: 1 })).edges[0]!.cursor }, alice.apiKey),
        'BAD_USER_INPUT',
      );
    });

    it('needs an API key', async () => {
      expectGraphQLError(await t.gql(DiscoverAgents, {}), 'UNAUTHENTICATED');
    });
  });

  describe('models', () => {
    const models: Record<string, string> = {};
    beforeAll(async () => {
      for (const [name, owner, fields] of [
        ['alicePublic', alice, { public: true, name: 'Watercolor' }],
        ['alicePrivate', alice, { public: false, name: 'My Face' }],
        ['bobPrivate', bob, { public: false, name: 'Bob Face' }],
        ['bobPublic', bob, { public: true, name: 'Ink Wash' }],
      ] as const) {
        models[name] = (await f.model(owner, fields)).id;
        await tick();
      }
    });
    const ids = async (variables: object, key = alice.apiKey) =>
      expectData(await t.gql(DiscoverModels, variables, key)).models.edges.map((e) => e.node.rawId);

    it('lists the models a user may use, newest first, with filters and paging both ways', async () => {
      expect(await ids({})).toEqual([models.bobPublic, models.alicePrivate, models.alicePublic]);
      expect(await ids({}, bob.apiKey)).toEqual([models.bobPublic, models.bobPrivate, models.alicePublic]);
      expect(await ids({ filter: { text: 'face' } })).toEqual([models.alicePrivate]);
      expect(await ids({ filter: { owner: globalId('Creator', bob.id) } })).toEqual([models.bobPublic]);
      expect(await ids({ filter: { public: false } })).toEqual([models.alicePrivate]);
      expect(await ids({ filter: { baseModel: 'sdxl' } })).toEqual([]);
      const run = async (v: object) => expectData(await t.gql(DiscoverModels, v, alice.apiKey)).models;
      expect(await forward(run, 1)).toEqual(await ids({}));
      expect(await backward(run, 2)).toEqual(await ids({}));
      expect(expectGraphQLError(await t.gql(DiscoverModels, { after: 'garbage', first: 1 }, alice.apiKey), 'BAD_USER_INPUT').message).toBe(
        'Invalid cursor',
      );
    });
  });

  describe('creations', () => {
    const creations: Record<string, string> = {};
    beforeAll(async () => {
      for (const [name, owner, fields] of [
        ['alicePublic', alice, { public: true, agentId: agents.alicePublic }],
        ['alicePrivate', alice, { public: false, tool: 'txt2vid' }],
        ['aliceDeleted', alice, { public: true, deleted: true }],
        ['bobPrivate', bob, { public: false }],
        ['bobPublic', bob, { public: true, tool: 'txt2vid' }],
      ] as const) {
        creations[name] = (await f.creation(owner, fields)).id;
        await tick();
      }
    });
    const ids = async (variables: object, key = alice.apiKey) =>
      expectData(await t.gql(DiscoverCreations, variables, key)).creations.edges.map((e) => e.node.rawId);

    it("is a feed of public creations and the viewer's own, newest first, never deleted ones or a stranger's private ones", async () => {
      expect(await ids({})).toEqual([creations.bobPublic, creations.alicePrivate, creations.alicePublic]);
      expect(await ids({}, bob.apiKey)).toEqual([creations.bobPublic, creations.bobPrivate, creations.alicePublic]);
    });

    it('filters by owner, agent, tool, public and text, and pages both ways', async () => {
      expect(await ids({ filter: { owner: bob.id } })).toEqual([creations.bobPublic]);
      expect(await ids({ filter: { agent: globalId('Agent', agents.alicePublic!) } })).toEqual([creations.alicePublic]);
      expect(await ids({ filter: { agent: agents.alicePublic } })).toEqual([creations.alicePublic]);
      expect(await ids({ filter: { tool: 'txt2vid' } })).toEqual([creations.bobPublic, creations.alicePrivate]);
      expect(await ids({ filter: { public: false } })).toEqual([creations.alicePrivate]);
      expect(await ids({ filter: { text: 'no such name' } })).toEqual([]);
      const run = async (v: object) => expectData(await t.gql(DiscoverCreations, v, alice.apiKey)).creations;
      expect(await forward(run, 2)).toEqual(await ids({}));
      expect(await backward(run, 1)).toEqual(await ids({}));
    });
  });
});

const NOT_FOUND = 'Agent not found';
const KEY_TAKEN = 'An agent with this key already exists';

describe('REST agents', () => {
  let seq = 0;
  const uniqueKey = (prefix = 'agent') => `${prefix}-${Date.now().toString(36)}-${++seq}`;

  /** An agent of `owner` with every field set to a non-default value. */
  async function richAgent(owner: TestUser, fields: Record<string, unknown> = {}) {
    const model = await f.model(owner, { public: false });
    const agent = await f.agent(owner, {
      name: 'Rich agent',
      key: uniqueKey('rich'),
      description: 'Paints lighthouses',
      image: 'https://cdn.example.com/agent.png',
      public: true,
      models: [{ lora: model.id, useWhen: 'for lighthouses' }],
      persona: 'You are a painter.',
      isPersonaPublic: false,
      greeting: 'Hello there',
      knowledge: 'Knows about the sea',
      voice: 'alloy',
      suggestions: [{ label: 'Paint', prompt: 'Paint a lighthouse' }],
      ownerPays: 'deployments',
      tools: { flux_dev: true, wan_t2v: false },
      toolApproval: { tools: { flux_dev: { above: 2 } }, timeoutSeconds: 90 },
      llmSettings: {
        modelProfile: 'medium',
        thinkingPolicy: 'always',
        thinkingEffortCap: 'high',
        thinkingEffortInstructions: 'think hard',
      },
      ...fields,
    });
    return { agent, model };
  }

  const read = async (id: string, user: TestUser = alice) => {
    const res = await t.rest('GET', `/v2/agents/${encodeURIComponent(id)}`, { key: user.apiKey });
    expect(res.status).toBe(200);
    return res.body.agent;
  };

  describe('auth', () => {
    it.each([
      ['GET', false],
      ['PATCH', true],
    ])('%s /v2/agents/{id} answers 401 {error} for missing, malformed and unknown keys', async (method, withBody) => {
      const { agent } = await richAgent(alice);
      const before = await read(agent.id);
      expect(await expectRejectsBadKeys(t, method, `/v2/agents/${agent.id}`, withBody ? { name: 'Hacked' } : undefined)).toBe(true);
      expect(await read(agent.id)).toEqual(before);
    });
  });

  describe('GET /v2/agents/{id}', () => {
    it('returns every field of my own agent', async () => {
      const { agent, model } = await richAgent(alice);
      const res = await t.rest('GET', `/v2/agents/${agent.id}`, { key: alice.apiKey });
      expect(res.status).toBe(200);
      expect(Object.keys(res.body)).toEqual(['agent']);
      expect(res.body.agent).toEqual({
        _id: agent.id,
        id: agent.id,
        key: agent.user.username,
        username: agent.user.username,
        userImage: 'https://cdn.example.com/agent.png',
        type: 'agent',
        name: 'Rich agent',
        description: 'Paints lighthouses',
        image: 'https://cdn.example.com/agent.png',
        public: true,
        models: [{ lora: model.id, use_when: 'for lighthouses' }],
        persona: 'You are a painter.',
        isPersonaPublic: false,
        greeting: 'Hello there',
        knowledge: 'Knows about the sea',
        voice: 'alloy',
        suggestions: [{ label: 'Paint', prompt: 'Paint a lighthouse' }],
        owner_pays: 'deployments',
        tools: { flux_dev: [] },
        tools_enabled: { flux_dev: true, wan_t2v: false },
        tool_approval: { tools: { flux_dev: { above: 2 } }, timeout_seconds: 90 },
        mcp_tools: [],
        llm_settings: {
          model_profile: 'medium',
          thinking_policy: 'always',
          thinking_effort_cap: 'high',
          thinking_effort_instructions: 'think hard',
        },
        owner: creatorRef(alice),
        createdAt: isoDate,
        updatedAt: isoDate,
      });
    });

    it('returns defaults for an agent created with only a name and key', async () => {
      const agent = await f.agent(alice, { key: uniqueKey('bare') });
      expect(await read(agent.id)).toEqual({
        _id: agent.id,
        id: agent.id,
        key: agent.user.username,
        username: agent.user.username,
        userImage: null,
        type: 'agent',
        name: 'Test agent',
        description: '',
        image: null,
        public: true,
        models: [],
        persona: '',
        isPersonaPublic: false,
        greeting: '',
        knowledge: '',
        voice: null,
        suggestions: [],
        owner_pays: 'off',
        tools: {},
        tools_enabled: {},
        tool_approval: { tools: {}, timeout_seconds: 600 },
        mcp_tools: [],
        llm_settings: { model_profile: null, thinking_policy: null, thinking_effort_cap: null, thinking_effort_instructions: null },
        owner: creatorRef(alice),
        createdAt: isoDate,
        updatedAt: isoDate,
      });
    });

    it("shows another user's public agent with a private persona as persona null", async () => {
      const { agent } = await richAgent(alice);
      const mine = await read(agent.id, alice);
      const theirs = await read(agent.id, bob);
      expect(mine.persona).toBe('You are a painter.');
      expect(theirs.persona).toBeNull();
      expect(theirs).toEqual({ ...mine, persona: null, mcp_tools: null });
    });

    it("shows another user's public agent with a public persona in full", async () => {
      const { agent } = await richAgent(alice, { isPersonaPublic: true });
      const theirs = await read(agent.id, bob);
      expect(theirs.persona).toBe('You are a painter.');
      expect(theirs).toEqual({ ...(await read(agent.id, alice)), mcp_tools: null });
    });

    it("refuses another user's private agent with 401 {error}", async () => {
      const { agent } = await richAgent(alice, { public: false });
      const res = await t.rest('GET', `/v2/agents/${agent.id}`, { key: bob.apiKey });
      expectError(res, 401, 'error');
      expect(res.body.error).not.toContain('You are a painter.');
      // The owner still sees it.
      expect((await read(agent.id, alice)).public).toBe(false);
    });

    it.each([
      ['a word', 'nope'],
      ['a 24-hex object id', '5f1e2d3c4b5a697887766554'],
      ['a uuid', '01890a5d-ac96-774b-bcce-b302099a8057'],
      ['unicode', 'agent-ünïcødé-🙂'],
      ['a long id', 'x'.repeat(90)],
      ['a quote and a semicolon', 'x\'; DROP TABLE "Agent";--'],
    ])('answers 404 {error:"Agent not found"} for an unknown id (%s)', async (_label, id) => {
      const res = await t.rest('GET', `/v2/agents/${encodeURIComponent(id)}`, { key: alice.apiKey });
      expectError(res, 404, 'error', NOT_FOUND);
    });

    it('answers 404, not 500, for an id containing a NUL byte', async () => {
      const res = await t.rest('GET', '/v2/agents/a%00b', { key: alice.apiKey });
      expectError(res, 404, 'error', NOT_FOUND);
    });
  });

  describe('PATCH /v2/agents/{id}', () => {
    const patch = (id: string, body: unknown, user: TestUser = alice) => t.rest('PATCH', `/v2/agents/${id}`, { key: user.apiKey, body });
    const withoutUpdatedAt = ({ updatedAt: _u, ...rest }: Record<string, unknown>) => rest;

    /** The fields the original's names mirror change with the field they mirror. */
    const withAliases = (changed: Record<string, unknown>) => ({
      ...changed,
      ...('key' in changed ? { username: changed.key } : {}),
      ...('image' in changed ? { userImage: changed.image } : {}),
      ...('tools' in changed
        ? {
            tools: Object.fromEntries(
              Object.entries(changed.tools as Record<string, boolean>)
                .filter(([, on]) => on)
                .map(([k]) => [k, []]),
            ),
            tools_enabled: changed.tools,
          }
        : {}),
    });

    /**
     * PATCHes `body` and checks the agent now equals the old one with exactly `changed` applied,
     * and that the answer is the spec's `{agentId}` with the updated agent beside it.
     */
    async function expectPatched(id: string, body: unknown, changed: Record<string, unknown>) {
      const before = await read(id);
      const res = await patch(id, body);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['agent', 'agentId']);
      expect(res.body.agentId).toBe(id);
      const after = await read(id);
      expect(res.body.agent).toEqual(after);
      expect(withoutUpdatedAt(after)).toEqual(withoutUpdatedAt({ ...before, ...withAliases(changed) }));
      return after;
    }

    /** Sends a failing PATCH and checks the agent (and its creator row) did not change. */
    async function expectRejected(
      id: string,
      body: unknown,
      status: number,
      options: { field?: string; text?: string; user?: TestUser; raw?: string } = {},
    ) {
      const before = await read(id);
      const beforeRow = await t.db.agent.findUniqueOrThrow({ where: { id }, include: { user: true } });
      const res =
        options.raw !== undefined
          ? await t.rest('PATCH', `/v2/agents/${id}`, { key: (options.user ?? alice).apiKey, rawBody: options.raw })
          : await patch(id, body, options.user);
      expect(res.status).toBe(status);
      expect(typeof res.body?.error).toBe('string');
      if (options.raw === undefined) expect(Object.keys(res.body)).toEqual(['error']);
      if (options.field) {
        expect(res.body.error.startsWith(`${options.field}: `), `"${res.body.error}" should name ${options.field}`).toBe(true);
        expect(res.body.error).not.toMatch(/llmSettings|ownerPays|useWhen|modelProfile|thinkingPolicy|thinkingEffort/);
      }
      if (options.text) expect(res.body.error).toBe(options.text);
      expect(await read(id)).toEqual(before);
      expect(await t.db.agent.findUniqueOrThrow({ where: { id }, include: { user: true } })).toEqual(beforeRow);
      return res;
    }

    it('changes only the fields sent, one at a time, and answers {agentId}', async () => {
      const { agent } = await richAgent(alice);
      const publicModel = await f.model(bob, { public: true });
      const cases: [Record<string, unknown>, Record<string, unknown>][] = [
        [{ name: 'Renamed' }, { name: 'Renamed' }],
        [{ description: 'New description' }, { description: 'New description' }],
        [{ image: 'https://cdn.example.com/new.png' }, { image: 'https://cdn.example.com/new.png' }],
        [{ image: null }, { image: null }],
        [{ public: false }, { public: false }],
        [
          { models: [{ lora: publicModel.id, use_when: 'for portraits' }] },
          { models: [{ lora: publicModel.id, use_when: 'for portraits' }] },
        ],
        [{ models: [] }, { models: [] }],
        [{ persona: 'You are a sculptor.' }, { persona: 'You are a sculptor.' }],
        [{ isPersonaPublic: true }, { isPersonaPublic: true }],
        [{ greeting: 'Hi!' }, { greeting: 'Hi!' }],
        [{ knowledge: 'Knows about mountains' }, { knowledge: 'Knows about mountains' }],
        [{ voice: 'nova' }, { voice: 'nova' }],
        [{ voice: null }, { voice: null }],
        [
          {
            suggestions: [
              { label: 'A', prompt: 'a' },
              { label: 'B', prompt: 'b' },
            ],
          },
          {
            suggestions: [
              { label: 'A', prompt: 'a' },
              { label: 'B', prompt: 'b' },
            ],
          },
        ],
        [{ owner_pays: 'full' }, { owner_pays: 'full' }],
        [{ tools: { kokoro_tts: true } }, { tools: { kokoro_tts: true } }],
        // The original's SDK sends lists of strings: a listed tool is on.
        [{ tools: { flux_dev: [], kokoro_tts: ['default'] } }, { tools: { flux_dev: true, kokoro_tts: true } }],
      ];
      for (const [body, changed] of cases) await expectPatched(agent.id, body, changed);
    });

    it('changes several fields at once and leaves the rest', async () => {
      const { agent } = await richAgent(alice);
      await expectPatched(
        agent.id,
        { name: 'Multi', greeting: 'Yo', owner_pays: 'off', suggestions: [] },
        { name: 'Multi', greeting: 'Yo', owner_pays: 'off', suggestions: [] },
      );
    });

    it('sets tool_approval, keeps the timeout when only the rules are sent, and refuses a tool that does not exist', async () => {
      const { agent } = await richAgent(alice);
      await expectPatched(
        agent.id,
        { tool_approval: { tools: { flux_schnell: 'always', flux_dev: { above: 0.5 } } } },
        { tool_approval: { tools: { flux_schnell: 'always', flux_dev: { above: 0.5 } }, timeout_seconds: 90 } },
      );
      await expectPatched(
        agent.id,
        { tool_approval: { timeout_seconds: 300 } },
        { tool_approval: { tools: { flux_schnell: 'always', flux_dev: { above: 0.5 } }, timeout_seconds: 300 } },
      );
      await expectPatched(agent.id, { tool_approval: { tools: {} } }, { tool_approval: { tools: {}, timeout_seconds: 300 } });
      await expectRejected(agent.id, { name: 'Kept', tool_approval: { tools: { teleport: 'always' } } }, 400, {
        field: 'tool_approval.tools.teleport',
      });
      await expectRejected(agent.id, { tool_approval: { timeout_seconds: 1 } }, 400, { field: 'tool_approval.timeout_seconds' });
      await expectRejected(agent.id, { tool_approval: { tools: { flux_dev: { above: -1 } } } }, 400, {
        field: 'tool_approval.tools.flux_dev.above',
      });
      await expectRejected(agent.id, { tool_approval: { tools: { flux_dev: 'sometimes' } } }, 400, {
        text: 'tool_approval.tools.flux_dev: must be "always" or {"above": <an amount of manna>}',
      });
    });

    it('merges llm_settings field by field', async () => {
      const { agent } = await richAgent(alice);
      const base = {
        model_profile: 'medium',
        thinking_policy: 'always',
        thinking_effort_cap: 'high',
        thinking_effort_instructions: 'think hard',
      };
      await expectPatched(agent.id, { llm_settings: { thinking_policy: 'off' } }, { llm_settings: { ...base, thinking_policy: 'off' } });
      await expectPatched(
        agent.id,
        { llm_settings: { model_profile: 'low', thinking_effort_instructions: 'be brief' } },
        {
          llm_settings: { ...base, thinking_policy: 'off', model_profile: 'low', thinking_effort_instructions: 'be brief' },
        },
      );

      // On an agent with no settings yet, a partial object sets only those fields.
      const bare = await f.agent(alice, { key: uniqueKey('bare') });
      await expectPatched(
        bare.id,
        { llm_settings: { thinking_effort_cap: 'medium' } },
        {
          llm_settings: { model_profile: null, thinking_policy: null, thinking_effort_cap: 'medium', thinking_effort_instructions: null },
        },
      );
    });

    // Which values each field takes is the agents' rule (test/rules/agents.test.ts, "what an agent’s
    // fields may be"); here, that a refusal is a 400 {error} naming the field as this API spells it.
    it.each([
      ['name', { name: 'x'.repeat(101) }],
      ['models[0].lora', { models: [{ lora: '' }] }],
      ['models[0].use_when', { models: [{ lora: 'some-model', use_when: 5 }] }],
      ['suggestions[1].prompt', { suggestions: [{ label: 'a', prompt: 'p' }, { label: 'b' }] }],
      ['owner_pays', { owner_pays: 'sometimes' }],
      ['tools.flux_dev', { tools: { flux_dev: [5] } }],
      ['llm_settings.thinking_effort_cap', { llm_settings: { thinking_effort_cap: 'max' } }],
    ])('refuses a bad %s with 400 naming the field, and changes nothing', async (field, bad) => {
      const { agent } = await richAgent(alice);
      // A valid field next to the bad one must not be applied either.
      const body = { ...(field === 'greeting' ? { knowledge: 'SHOULD NOT APPLY' } : { greeting: 'SHOULD NOT APPLY' }), ...bad };
      await expectRejected(agent.id, body, 400, { field });
    });

    it('refuses 11 models with 422 {error} naming models, changing nothing', async () => {
      const { agent } = await richAgent(alice);
      const models = await Promise.all(Array.from({ length: 11 }, () => f.model(alice, { public: false })));
      const res = await expectRejected(agent.id, { greeting: 'SHOULD NOT APPLY', models: models.map((m) => ({ lora: m.id })) }, 422, {
        field: 'models',
      });
      expect(res.body.error).toMatch(/10/);
    });

    it('merges concurrent PATCHes of different llm_settings fields without losing any', async () => {
      const { agent } = await richAgent(alice);
      const settings = {
        model_profile: 'high',
        thinking_policy: 'always',
        thinking_effort_cap: 'medium',
        thinking_effort_instructions: 'Think in steps.',
      };
      const responses = await Promise.all(
        Object.entries(settings).map(([field, value]) => patch(agent.id, { llm_settings: { [field]: value } })),
      );
      expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      expect((await read(agent.id)).llm_settings).toEqual(settings);
    });

    it('changes the key; GET shows the new key and the old key becomes free', async () => {
      const { agent } = await richAgent(alice);
      const oldKey = agent.user.username;
      const newKey = uniqueKey('renamed');
      await expectPatched(agent.id, { key: newKey }, { key: newKey });
      expect((await t.db.user.findUniqueOrThrow({ where: { id: agent.id } })).username).toBe(newKey);
      // Another agent may now take the old key.
      const other = await f.agent(alice, { key: uniqueKey('other') });
      await expectPatched(other.id, { key: oldKey }, { key: oldKey });
      // Setting an agent's key to its own current key is not a conflict.
      await expectPatched(other.id, { key: oldKey, name: 'Same key' }, { key: oldKey, name: 'Same key' });
    });

    it('refuses a key taken by another agent with 409, changing nothing', async () => {
      const { agent } = await richAgent(alice);
      const taken = await f.agent(bob, { key: uniqueKey('taken') });
      await expectRejected(agent.id, { name: 'SHOULD NOT APPLY', key: taken.user.username }, 409, { text: KEY_TAKEN });
    });

    it("refuses a non-owner with 401 {error}, also on another user's public agent, changing nothing", async () => {
      const { agent } = await richAgent(alice, { public: true });
      await expectRejected(agent.id, { name: 'Hijacked', key: uniqueKey('hijack') }, 401, { user: bob });
      const priv = await richAgent(alice, { public: false });
      await expectRejected(priv.agent.id, { name: 'Hijacked' }, 401, { user: bob });
    });

    it('answers 404 {error:"Agent not found"} for an unknown agent', async () => {
      for (const id of ['nope', '5f1e2d3c4b5a697887766554']) {
        const res = await patch(id, { name: 'Ghost' });
        expectError(res, 404, 'error', NOT_FOUND);
      }
      expect(await t.db.agent.count({ where: { name: 'Ghost' } })).toBe(0);
    });

    it('refuses a string containing a NUL character with 400 (not 500), changing nothing', async () => {
      const { agent } = await richAgent(alice);
      const before = await read(agent.id);
      for (const body of [
        { name: 'a\u0000b' },
        { greeting: 'SHOULD NOT APPLY', llm_settings: { thinking_effort_instructions: 'x\u0000' } },
      ]) {
        const res = await patch(agent.id, body);
        expect(res.status).toBe(400);
        expect(typeof res.body.error).toBe('string');
      }
      expect(await read(agent.id)).toEqual(before);
    });

    it('refuses a body with no known fields with 400', async () => {
      const { agent } = await richAgent(alice);
      await expectRejected(agent.id, {}, 400);
      await expectRejected(agent.id, { nickname: 'x', owner: bob.id, id: 'other' }, 400);
    });

    it('ignores read-only fields sent next to writable ones', async () => {
      const { agent } = await richAgent(alice);
      const before = await read(agent.id);
      await expectPatched(
        agent.id,
        { name: 'Only name', owner: bob.id, id: 'other-id', createdAt: '2000-01-01T00:00:00.000Z' },
        { name: 'Only name' },
      );
      expect((await read(agent.id)).owner).toEqual(before.owner);
    });

    it.each([
      ['malformed JSON', '{"name": "x",'],
      ['a JSON array', '[{"name":"x"}]'],
      ['a JSON string', '"x"'],
      ['JSON null', 'null'],
    ])('refuses %s with 400 {error}, changing nothing', async (_label, raw) => {
      const { agent } = await richAgent(alice);
      await expectRejected(agent.id, undefined, 400, { raw });
    });

    it('refuses a PATCH without a body with 400', async () => {
      const { agent } = await richAgent(alice);
      const before = await read(agent.id);
      const res = await t.rest('PATCH', `/v2/agents/${agent.id}`, { key: alice.apiKey });
      expect(res.status).toBe(400);
      expect(typeof res.body.error).toBe('string');
      expect(await read(agent.id)).toEqual(before);
    });
  });
});

/**
 * `DELETE /v2/agents/{id}`: the agent's triggers end, its deployments stop with their secrets, its
 * memories go; sessions stay with their owners (the agent's messages remain, it answers no more);
 * nothing of another user's is lost (docs/agents-at-work.md, "Deleting an agent").
 */
describe('deleting an agent', () => {
  /** Alice's public agent, busy: a trigger, a deployment, memories of both users, bob's session with it, things made with it. */
  async function busyAgent() {
    const agent = await f.agent(alice, { name: 'Busy', image: 'https://cdn.example.com/busy.png' });
    await f.trigger(agent.id, alice.id);
    await f.deployment(agent.id, alice.id);
    const concept = await f.concept(alice, { agent: agent.id });
    const res = await t.rest('POST', '/v2/sessions', { key: bob.apiKey, body: { agent_ids: [agent.id], content: 'Hello, Busy' } });
    const sessionId = res.body.session_id as string;
    const before = await settledSession(t, bob, sessionId);
    for (const user of [alice, bob])
      await t.db.memory.create({
        data: { agentId: agent.id, userId: user.id, sessionId, fact: `Knows ${user.username}`, key: user.username },
      });
    const creation = await f.creation(bob, { agentId: agent.id });
    return { agent, concept, sessionId, before, creation };
  }

  it('takes its triggers, deployments (their secrets with them) and memories; sessions, messages, creations and concepts stay', async () => {
    const { agent, concept, sessionId, before, creation } = await busyAgent();
    const balances = await t.db.user.findMany({ where: { id: { in: [alice.id, bob.id] } }, select: { id: true, foreverBalance: true } });

    const res = await t.rest('DELETE', `/v2/agents/${agent.id}`, { key: alice.apiKey });
    expect(res).toMatchObject({ status: 200, body: { success: true } });

    expect(await t.db.trigger.count({ where: { agentId: agent.id } })).toBe(0);
    expect(await t.db.deployment.count({ where: { agentId: agent.id } })).toBe(0);
    expect(await t.db.memory.count({ where: { agentId: agent.id } })).toBe(0);
    expect((await t.rest('GET', `/v2/agents/${agent.id}`, { key: alice.apiKey })).status).toBe(404);

    // Bob's session is his still, with every message, the agent's reply with its sender's name.
    const after = await settledSession(t, bob, sessionId);
    expect(after.messages.map((m: { id: string }) => m.id)).toEqual(before.messages.map((m: { id: string }) => m.id));
    const reply = after.messages.find((m: { role: string }) => m.role === 'assistant');
    expect(reply.sender).toMatchObject({ _id: agent.id, username: agent.user.username, type: 'agent' });
    expect(after.session.agents).toEqual([]);
    // It answers no more: a prompt is refused, and nothing is saved.
    const prompt = await t.rest('POST', '/v2/sessions', { key: bob.apiKey, body: { session_id: sessionId, content: 'Still there?' } });
    expect(prompt.status).toBe(403);
    expect(prompt.body.message).toMatch(/deleted/);
    expect((await settledSession(t, bob, sessionId)).messages).toHaveLength(before.messages.length);

    expect(await t.db.creation.findUniqueOrThrow({ where: { id: creation.id } })).toMatchObject({
      agentId: null,
      userId: bob.id,
      deleted: false,
    });
    expect(await t.db.concept.findUniqueOrThrow({ where: { id: concept.id } })).toMatchObject({ agentId: null, userId: alice.id });
    expect(await t.db.user.findMany({ where: { id: { in: [alice.id, bob.id] } }, select: { id: true, foreverBalance: true } })).toEqual(
      balances,
    );
    // Its key stays with its messages: a new agent cannot take it and pass for the old one.
    const again = await t.rest('POST', '/v2/agents', { key: alice.apiKey, body: { name: 'Busy again', key: agent.user.username } });
    expect(again).toMatchObject({ status: 409, body: { error: 'An agent with this key already exists' } });
    // A creator profile of it is no longer shown.
    expect((await t.rest('GET', `/v2/creators/${agent.id}`, { key: bob.apiKey })).status).toBe(404);
  });

  it("is its owner's only: others are refused (a private agent is not found) and nothing goes", async () => {
    const { agent } = await busyAgent();
    const refused = await t.rest('DELETE', `/v2/agents/${agent.id}`, { key: bob.apiKey });
    expect(refused).toMatchObject({ status: 401, body: { error: 'Only the owner of this agent can delete it' } });
    const hidden = await f.agent(alice, { public: false });
    const unseen = await t.rest('DELETE', `/v2/agents/${hidden.id}`, { key: bob.apiKey });
    expect(unseen).toEqual(expect.objectContaining({ status: 404, body: { error: 'Agent not found' } }));
    expect((await t.rest('DELETE', '/v2/agents/no-such-agent', { key: alice.apiKey })).status).toBe(404);
    expect(await t.db.agent.count({ where: { id: { in: [agent.id, hidden.id] } } })).toBe(2);
    expect(await t.db.trigger.count({ where: { agentId: agent.id } })).toBe(1);
    expect(await t.db.deployment.count({ where: { agentId: agent.id } })).toBe(1);
    expect(await t.db.memory.count({ where: { agentId: agent.id } })).toBe(2);
  });
});

describe('GET /v2/creators/me', () => {
  let t: TestApp;
  let alice: TestUser;

  setUp(async (start) => {
    t = await start.app();
    alice = await t.createUser('alice');
  });

  const me = async (user: TestUser) => {
    const res = await t.rest('GET', '/v2/creators/me', { key: user.apiKey });
    expect(res.status).toBe(200);
    return res.body;
  };

  it('answers 401 {error} for missing, malformed and unknown keys', async () => {
    expect(await expectRejectsBadKeys(t, 'GET', '/v2/creators/me')).toBe(true);
  });

  it('returns my profile with numeric balances', async () => {
    const res = await t.rest('GET', '/v2/creators/me', { key: alice.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      balance: 0,
      subscriptionBalance: 0,
      foreverBalance: 0,
      creator: {
        _id: alice.id,
        id: alice.id,
        userId: alice.id,
        username: 'alice',
        userImage: null,
        type: 'user',
        subscriptionTier: 0,
        subscriptionTierName: 'free',
        featureFlags: [],
        createdAt: isoDate,
        updatedAt: isoDate,
      },
    });
  });

  it("is scoped to the caller: another user's key shows that user", async () => {
    const bob = await t.createUser('bob');
    const body = await me(bob);
    expect(body.creator.id).toBe(bob.id);
    expect(body.creator.username).toBe('bob');
  });

  it('shows exact decimal balances after credits, balance = subscription + forever, one ledger row per move', async () => {
    const carol = await t.createUser('carol');
    const moves = [
      { kind: 'subscription' as const, amount: '10.25', reason: 'monthly grant' },
      { kind: 'forever' as const, amount: '0.5', reason: 'purchase' },
      { kind: 'forever' as const, amount: '0.1', reason: 'purchase' },
      { kind: 'forever' as const, amount: '0.2', reason: 'purchase' },
    ];
    await t.db.$transaction(async (tx) => {
      for (const move of moves) await credit(tx, { userId: carol.id, ...move });
    });

    const body = await me(carol);
    expect(body.subscriptionBalance).toBe(10.25);
    expect(body.foreverBalance).toBe(0.8);
    expect(body.balance).toBe(11.05);
    expect(typeof body.balance).toBe('number');

    const ledger = await t.db.mannaLedger.findMany({ where: { userId: carol.id }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
    expect(ledger.map((row) => [row.kind, row.amount.toString(), row.balanceAfter.toString(), row.reason])).toEqual([
      ['subscription', '10.25', '10.25', 'monthly grant'],
      ['forever', '0.5', '0.5', 'purchase'],
      ['forever', '0.1', '0.6', 'purchase'],
      ['forever', '0.2', '0.8', 'purchase'],
    ]);
  });

  it('changes neither balance nor ledger when the transaction holding a credit fails', async () => {
    const dave = await t.createUser('dave');
    await t.db.$transaction((tx) => credit(tx, { userId: dave.id, kind: 'forever', amount: '3', reason: 'purchase' }));
    await expect(
      t.db.$transaction(async (tx) => {
        await credit(tx, { userId: dave.id, kind: 'subscription', amount: '5', reason: 'grant' });
        throw new Error('payment provider said no');
      }),
    ).rejects.toThrow('payment provider said no');
    await expect(
      t.db.$transaction((tx) => credit(tx, { userId: dave.id, kind: 'forever', amount: '-1', reason: 'bad' })),
    ).rejects.toThrow();

    const body = await me(dave);
    expect([body.balance, body.subscriptionBalance, body.foreverBalance]).toEqual([3, 0, 3]);
    expect(await t.db.mannaLedger.count({ where: { userId: dave.id } })).toBe(1);
  });
});
