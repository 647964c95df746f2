import { beforeEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError, postRaw } from './support.ts';

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

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
let f: ReturnType<typeof fixtures>;
let keySeq = 0;
const newKey = () => `agent-key-${++keySeq}`;

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  f = fixtures(t);
});

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

  it("hides another user's private persona, but shows it to the owner", async () => {
    const agent = await f.agent(alice, { persona: 'Secretly a pirate', isPersonaPublic: false, public: true });
    expect((await readAgent(agent.id, bob.apiKey)).persona).toBeNull();
    expect((await readAgent(agent.id, alice.apiKey)).persona).toBe('Secretly a pirate');

    const open = await f.agent(alice, { persona: 'Openly a pirate', isPersonaPublic: true, public: true });
    expect((await readAgent(open.id, bob.apiKey)).persona).toBe('Openly a pirate');
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
