import { beforeAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { unsafeUrls } from '../helpers/unsafe-urls.ts';
import { expectCleanErrors, postRaw } from './support.ts';

/** The same attacks as over REST, through GraphQL inputs; limits are small to reach them quickly. */
const MAX_AGENTS = 3;

let t: TestApp;
let alice: TestUser;
let bob: TestUser;

setUp(async (start) => {
  t = await start.app({ maxAgentsPerUser: MAX_AGENTS });
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
});

async function gql(user: TestUser, query: string, variables: Record<string, unknown> = {}) {
  const { json } = await postRaw(t, { query, variables }, user.apiKey);
  return json as { data: any; errors?: { message: string; extensions?: { code?: string; field?: string } }[] };
}

function expectCode(response: Awaited<ReturnType<typeof gql>>, code: string, message: string, field?: string) {
  expect(response.errors, JSON.stringify(response)).toHaveLength(1);
  expect(response.errors![0]).toMatchObject({ message, extensions: { code, ...(field ? { field } : {}) } });
  expectCleanErrors(response.errors);
}

const createAgent = 'mutation($input: CreateAgentInput!) { createAgent(input: $input) { id key } }';
const updateAgent = 'mutation($id: ID!, $input: UpdateAgentInput!) { updateAgent(id: $id, input: $input) { id image } }';

describe('URLs a user gives are http or https only', () => {
  let agent: { id: string };
  beforeAll(async () => {
    agent = await fixtures(t).agent(alice, { image: 'https://cdn.example.com/a.png' });
  });

  it.each(unsafeUrls)('%j is BAD_USER_INPUT in agent and concept inputs and attachments', async (url) => {
    expectCode(
      await gql(alice, updateAgent, { id: agent.id, input: { image: url } }),
      'BAD_USER_INPUT',
      'image: must be an http or https URL',
      'image',
    );
    const concept = await fixtures(t).concept(alice);
    expectCode(
      await gql(alice, 'mutation($id: ID!, $input: UpdateConceptInput!) { updateConcept(id: $id, input: $input) { id } }', {
        id: concept.id,
        input: { images: [{ image: 'https://example.com/ok.png' }, { image: url }] },
      }),
      'BAD_USER_INPUT',
      'images[1].image: must be an http or https URL',
      'images.1.image',
    );
    expectCode(
      await gql(alice, 'mutation($input: SendMessageInput!) { sendMessage(input: $input) { promptId } }', {
        input: { agentIds: [agent.id], content: 'look', attachments: [url] },
      }),
      'BAD_USER_INPUT',
      'attachments[0]: must be an http or https URL',
      'attachments.0',
    );
    expect((await t.db.agent.findUniqueOrThrow({ where: { id: agent.id } })).image).toBe('https://cdn.example.com/a.png');
    expect((await t.db.conceptImage.findMany({ where: { conceptId: concept.id } })).map((i) => i.image)).toEqual([
      'https://example.com/a.jpg',
    ]);
  });
});

describe('look-alike agent keys', () => {
  it("an agent named with another user's name in other letters is CONFLICT", async () => {
    for (const key of ['ALICE', 'Alice'])
      expectCode(await gql(bob, createAgent, { input: { name: 'Alice', key } }), 'CONFLICT', 'An agent with this key already exists');
    // Full-width letters are not allowed in keys at all; the database would refuse them as "alice" too.
    expect((await gql(bob, createAgent, { input: { name: 'Alice', key: 'ａｌｉｃｅ' } })).errors?.[0]?.extensions?.code).toBe(
      'BAD_USER_INPUT',
    );
    expect(await t.db.user.count({ where: { username: { in: ['ALICE', 'Alice', 'ａｌｉｃｅ'] } } })).toBe(0);
  });
});

describe('tools named like prototype members', () => {
  it('tools.constructor is an unknown tool, named as sent', async () => {
    const agent = await fixtures(t).agent(bob);
    expectCode(
      await gql(bob, updateAgent, { id: agent.id, input: { tools: { constructor: true } } }),
      'BAD_USER_INPUT',
      'tools.constructor: unknown tool "constructor" (see the tools list)',
      'tools.constructor',
    );
  });
});

describe('agents per user', () => {
  it(`are capped at ${MAX_AGENTS}, even when created all at once, with an error that says the limit`, async () => {
    const carol = await t.createUser('carol');
    const attempts = await Promise.all(
      Array.from({ length: MAX_AGENTS + 3 }, (_, i) => gql(carol, createAgent, { input: { name: `Squat ${i}`, key: `squat-${i}` } })),
    );
    const created = attempts.filter((r) => r.data?.createAgent);
    const refused = attempts.filter((r) => r.errors);
    expect(created).toHaveLength(MAX_AGENTS);
    expect(refused).toHaveLength(3);
    for (const r of refused) expectCode(r, 'BAD_USER_INPUT', `Agent limit reached: a user may own at most ${MAX_AGENTS} agents`);
    expect(await t.db.agent.count({ where: { ownerId: carol.id } })).toBe(MAX_AGENTS);
    expect(await t.db.user.count({ where: { username: { startsWith: 'squat-' } } })).toBe(MAX_AGENTS);
  });
});
