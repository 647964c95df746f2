import { beforeEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';

graphql(`
  fragment ConceptsConceptFields on Concept {
    id
    rawId
    name
    usageInstructions
    public
    images { image usageInstructions }
    agent { rawId key name }
    owner { rawId username }
    createdAt
    updatedAt
  }
`);

const ConceptsGet = graphql(`
  query ConceptsGet($id: ID!) {
    concept(id: $id) { ...ConceptsConceptFields }
  }
`);
const ConceptsCreate = graphql(`
  mutation ConceptsCreate($input: CreateConceptInput!) {
    createConcept(input: $input) { ...ConceptsConceptFields }
  }
`);
const ConceptsUpdate = graphql(`
  mutation ConceptsUpdate($id: ID!, $input: UpdateConceptInput!) {
    updateConcept(id: $id, input: $input) { ...ConceptsConceptFields }
  }
`);

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
let f: ReturnType<typeof fixtures>;
let aliceAgent: { id: string; key: string };

const images = (n: number, prefix = 'img') =>
  Array.from({ length: n }, (_, i) => ({ image: `https://cdn.example.com/${prefix}-${i}.jpg`, usageInstructions: `${prefix} view ${i}` }));

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  f = fixtures(t);
  const agent = await f.agent(alice, { key: 'alice-painter', name: 'Painter' });
  aliceAgent = { id: agent.id, key: 'alice-painter' };
});

const readConcept = async (id: string, key = alice.apiKey) => expectData(await t.gql(ConceptsGet, { id }, key)).concept;

describe('createConcept and concept(id)', () => {
  it('creates a concept with its images in order, its agent and owner, then reads it back', async () => {
    const input = { name: 'Lighthouse keeper', usageInstructions: 'Use for every portrait', agent: aliceAgent.id, images: images(3) };
    const created = expectData(await t.gql(ConceptsCreate, { input }, alice.apiKey)).createConcept;
    expect(created).toMatchObject({
      name: 'Lighthouse keeper',
      usageInstructions: 'Use for every portrait',
      public: false,
      images: images(3),
      agent: { rawId: aliceAgent.id, key: 'alice-painter', name: 'Painter' },
      owner: { rawId: alice.id, username: 'alice' },
    });
    expect(await readConcept(created.id)).toEqual(created);
  });

  it('defaults: no agent, empty usage instructions on the concept and images', async () => {
    const created = expectData(
      await t.gql(ConceptsCreate, { input: { name: 'Bare', images: [{ image: 'https://cdn.example.com/only.jpg' }] } }, alice.apiKey),
    ).createConcept;
    expect(created).toMatchObject({
      agent: null,
      usageInstructions: '',
      images: [{ image: 'https://cdn.example.com/only.jpg', usageInstructions: '' }],
    });
  });

  it.each([
    ['26 images', { images: images(26) }, 'images'],
    ['an image that is not a URL', { images: [{ image: 'not-a-url' }] }, 'images.0.image'],
    ['an empty name', { name: '' }, 'name'],
  ])('%s is BAD_USER_INPUT naming the field, and nothing is created', async (_name, fields, field) => {
    const before = await t.db.concept.count();
    const response = await t.gql(ConceptsCreate, { input: { name: 'Valid', images: images(1), ...fields } }, alice.apiKey);
    expect(response.data).toBeNull();
    expect(expectGraphQLError(response, 'BAD_USER_INPUT').extensions?.field).toBe(field);
    expect(await t.db.concept.count()).toBe(before);
  });

  it("another user's agent is BAD_USER_INPUT on agent, and nothing is created", async () => {
    const before = await t.db.concept.count();
    const response = await t.gql(ConceptsCreate, { input: { name: 'Borrowed', agent: aliceAgent.id, images: images(1) } }, bob.apiKey);
    expect(expectGraphQLError(response, 'BAD_USER_INPUT').extensions?.field).toBe('agent');
    expect(await t.db.concept.count()).toBe(before);
  });

  it("another user's private concept is FORBIDDEN; a public one is readable", async () => {
    const concept = await f.concept(alice, { name: 'Private look' });
    const response = await t.gql(ConceptsGet, { id: concept.id }, bob.apiKey);
    expect(response.data).toBeNull();
    expectGraphQLError(response, 'FORBIDDEN');
    expect(JSON.stringify(response)).not.toContain('Private look');

    await t.db.concept.update({ where: { id: concept.id }, data: { public: true } });
    expect(await readConcept(concept.id, bob.apiKey)).toMatchObject({ name: 'Private look', public: true, owner: { username: 'alice' } });
  });

  it('an unknown id is NOT_FOUND', async () => {
    const response = await t.gql(ConceptsGet, { id: 'no-such-concept' }, alice.apiKey);
    expect(response.data).toBeNull();
    expect(expectGraphQLError(response, 'NOT_FOUND').path).toEqual(['concept']);
  });
});

describe('updateConcept', () => {
  let conceptId: string;

  beforeEach(async () => {
    const created = expectData(
      await t.gql(
        ConceptsCreate,
        { input: { name: 'Original', usageInstructions: 'Original instructions', agent: aliceAgent.id, images: images(3, 'orig') } },
        alice.apiKey,
      ),
    ).createConcept;
    conceptId = created.rawId;
  });

  const withoutUpdatedAt = <T extends { updatedAt: string }>({ updatedAt: _u, ...rest }: T) => rest;

  it('changes only the fields given', async () => {
    const before = await readConcept(conceptId);
    const updated = expectData(await t.gql(ConceptsUpdate, { id: conceptId, input: { name: 'Renamed' } }, alice.apiKey)).updateConcept;
    expect(withoutUpdatedAt(updated)).toEqual({ ...withoutUpdatedAt(before), name: 'Renamed' });
    expect(withoutUpdatedAt(await readConcept(conceptId))).toEqual(withoutUpdatedAt(updated));
  });

  it('images replace the whole list, in the order given', async () => {
    const replacement = [
      { image: 'https://cdn.example.com/new-b.jpg', usageInstructions: 'second look' },
      { image: 'https://cdn.example.com/new-a.jpg', usageInstructions: 'first look' },
    ];
    const updated = expectData(await t.gql(ConceptsUpdate, { id: conceptId, input: { images: replacement } }, alice.apiKey)).updateConcept;
    expect(updated.images).toEqual(replacement);
    expect(updated.name).toBe('Original');
    expect(updated.usageInstructions).toBe('Original instructions');
    expect(updated.agent?.rawId).toBe(aliceAgent.id);
    expect((await readConcept(conceptId)).images).toEqual(replacement);
  });

  it('agent: null detaches the concept, and an own agent attaches it', async () => {
    const detached = expectData(await t.gql(ConceptsUpdate, { id: conceptId, input: { agent: null } }, alice.apiKey)).updateConcept;
    expect(detached.agent).toBeNull();
    expect(detached.images).toHaveLength(3);
    expect((await readConcept(conceptId)).agent).toBeNull();

    const attached = expectData(
      await t.gql(ConceptsUpdate, { id: conceptId, input: { agent: aliceAgent.id } }, alice.apiKey),
    ).updateConcept;
    expect(attached.agent).toEqual({ rawId: aliceAgent.id, key: 'alice-painter', name: 'Painter' });
  });

  // Which values each field takes is the concepts' rule (test/rules/concepts.test.ts, "what a
  // concept’s fields may be"); here, how GraphQL tells a refusal: its code, and the field as a dotted path.
  it.each([
    ['an image that is not a URL', { images: [...images(2), { image: 'not a url' }] }, 'images.2.image'],
    ['usage instructions over 5000 characters', { usageInstructions: 'u'.repeat(5001) }, 'usageInstructions'],
  ])('%s is BAD_USER_INPUT naming the field, and nothing changes', async (_name, input, field) => {
    const before = await readConcept(conceptId);
    const response = await t.gql(ConceptsUpdate, { id: conceptId, input: { name: 'Should not stick', ...input } }, alice.apiKey);
    expect(response.data).toBeNull();
    expect(expectGraphQLError(response, 'BAD_USER_INPUT').extensions?.field).toBe(field);
    expect(await readConcept(conceptId)).toEqual(before);
  });

  it('a non-owner is FORBIDDEN, even on a public concept, and nothing changes', async () => {
    await t.db.concept.update({ where: { id: conceptId }, data: { public: true } });
    const before = await readConcept(conceptId);
    const response = await t.gql(ConceptsUpdate, { id: conceptId, input: { name: 'Taken over', images: images(1, 'evil') } }, bob.apiKey);
    expect(response.data).toBeNull();
    expectGraphQLError(response, 'FORBIDDEN');
    expect(await readConcept(conceptId)).toEqual(before);
  });

  it('an unknown id is NOT_FOUND', async () => {
    const response = await t.gql(ConceptsUpdate, { id: 'no-such-concept', input: { name: 'x' } }, alice.apiKey);
    expect(response.data).toBeNull();
    expectGraphQLError(response, 'NOT_FOUND');
  });
});
