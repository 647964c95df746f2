import { beforeEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';
import { expectError, expectRejectsBadKeys, isoDate } from '../helpers/rest-helpers.ts';

/**
 * Concepts on the wire, GraphQL then REST (the rules: test/rules/concepts.test.ts). One file for
 * the domain's transports, over one app: each test reads and changes concepts of its own.
 */

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
  Array.from({ length: n }, (_, i) => ({
    image: `https://cdn.example.com/${prefix}-${i}.jpg`,
    usageInstructions: `${prefix} view ${i}`,
  }));

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  f = fixtures(t);
  const agent = await f.agent(alice, { key: 'alice-painter', name: 'Painter' });
  aliceAgent = { id: agent.id, key: 'alice-painter' };
});

describe('concepts over GraphQL', () => {
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
      const updated = expectData(
        await t.gql(ConceptsUpdate, { id: conceptId, input: { images: replacement } }, alice.apiKey),
      ).updateConcept;
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
});

const NOT_FOUND = 'Concept not found';

describe('REST concepts', () => {
  const twoImages = [
    { image: 'https://example.com/front.jpg', usageInstructions: 'front view' },
    { image: 'https://example.com/side.jpg', usageInstructions: 'side view' },
  ];

  async function concept(owner: TestUser, fields: Record<string, unknown> = {}, options: { public?: boolean } = {}) {
    const c = await f.concept(owner, {
      name: 'Lighthouse look',
      usageInstructions: 'use for coastal scenes',
      images: twoImages,
      ...fields,
    });
    if (options.public) await t.db.concept.update({ where: { id: c.id }, data: { public: true } });
    return c;
  }

  const read = async (id: string, user: TestUser = alice) => {
    const res = await t.rest('GET', `/v2/concepts/${id}`, { key: user.apiKey });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(['concept']);
    return res.body.concept;
  };

  const patch = (id: string, body: unknown, user: TestUser = alice) => t.rest('PATCH', `/v2/concepts/${id}`, { key: user.apiKey, body });
  const withoutUpdatedAt = ({ updatedAt: _u, ...rest }: Record<string, unknown>) => rest;
  const imageRows = (conceptId: string) => t.db.conceptImage.findMany({ where: { conceptId }, orderBy: { position: 'asc' } });

  async function expectPatched(id: string, body: unknown, changed: Record<string, unknown>) {
    const before = await read(id);
    const res = await patch(id, body);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(['concept']);
    const expected = withoutUpdatedAt({ ...before, ...changed });
    expect(withoutUpdatedAt(res.body.concept)).toEqual(expected);
    expect(res.body.concept.updatedAt).toEqual(isoDate);
    // The response is the concept as stored.
    expect(await read(id)).toEqual(res.body.concept);
    return res.body.concept;
  }

  async function expectRejected(
    id: string,
    body: unknown,
    status: number,
    options: { field?: string; text?: string; user?: TestUser; raw?: string } = {},
  ) {
    const before = await read(id);
    const rowsBefore = await imageRows(id);
    const res =
      options.raw !== undefined
        ? await t.rest('PATCH', `/v2/concepts/${id}`, { key: (options.user ?? alice).apiKey, rawBody: options.raw })
        : await patch(id, body, options.user);
    expect(res.status).toBe(status);
    if (options.raw === undefined) expect(Object.keys(res.body)).toEqual(['message']);
    expect(typeof res.body.message).toBe('string');
    if (options.field) {
      expect(res.body.message.startsWith(`${options.field}: `), `"${res.body.message}" should name ${options.field}`).toBe(true);
      expect(res.body.message).not.toContain('usageInstructions');
    }
    if (options.text) expect(res.body.message).toBe(options.text);
    expect(await read(id)).toEqual(before);
    expect(await imageRows(id)).toEqual(rowsBefore);
    return res;
  }

  describe('auth', () => {
    it.each([
      ['GET', undefined],
      ['PATCH', { name: 'Hacked' }],
    ])('%s /v2/concepts/{id} answers 401 {error} for missing, malformed and unknown keys', async (method, body) => {
      const c = await concept(alice);
      const before = await read(c.id);
      expect(await expectRejectsBadKeys(t, method, `/v2/concepts/${c.id}`, body)).toBe(true);
      expect(await read(c.id)).toEqual(before);
    });
  });

  describe('GET /v2/concepts/{id}', () => {
    it('returns my concept with every field', async () => {
      const agent = await f.agent(alice);
      const c = await concept(alice, { agent: agent.id });
      const res = await t.rest('GET', `/v2/concepts/${c.id}`, { key: alice.apiKey });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        concept: {
          _id: c.id,
          id: c.id,
          name: 'Lighthouse look',
          agent: agent.id,
          user: alice.id,
          usage_instructions: 'use for coastal scenes',
          images: [
            { image: 'https://example.com/front.jpg', usage_instructions: 'front view' },
            { image: 'https://example.com/side.jpg', usage_instructions: 'side view' },
          ],
          public: false,
          createdAt: isoDate,
          updatedAt: isoDate,
        },
      });
    });

    it("refuses another user's private concept with 403 {message}", async () => {
      const c = await concept(alice);
      const res = await t.rest('GET', `/v2/concepts/${c.id}`, { key: bob.apiKey });
      expectError(res, 403, 'message');
      expect(res.body.message).not.toContain('Lighthouse');
    });

    it("shows another user's public concept", async () => {
      const c = await concept(alice, {}, { public: true });
      expect(await read(c.id, bob)).toEqual(await read(c.id, alice));
    });

    it.each([['nope'], ['5f1e2d3c4b5a697887766554'], ['01890a5d-ac96-774b-bcce-b302099a8057'], ['a%00b']])(
      'answers 404 {message:"Concept not found"} for unknown id %s',
      async (id) => {
        expectError(await t.rest('GET', `/v2/concepts/${id}`, { key: alice.apiKey }), 404, 'message', NOT_FOUND);
      },
    );
  });

  describe('PATCH /v2/concepts/{id}', () => {
    it('changes only the fields sent and returns the full updated concept', async () => {
      const c = await concept(alice);
      await expectPatched(c.id, { name: 'Harbour look' }, { name: 'Harbour look' });
      await expectPatched(c.id, { usage_instructions: 'use at dusk' }, { usage_instructions: 'use at dusk' });
      await expectPatched(c.id, { name: 'Both', usage_instructions: '' }, { name: 'Both', usage_instructions: '' });
    });

    it('replaces the image list when images are sent (order kept, usage_instructions defaulting to "")', async () => {
      const c = await concept(alice);
      const images = [
        { image: 'https://example.com/3.jpg', usage_instructions: 'third' },
        { image: 'https://example.com/1.jpg' },
        { image: 'https://example.com/2.jpg', usage_instructions: 'second' },
      ];
      await expectPatched(
        c.id,
        { images },
        {
          images: [
            { image: 'https://example.com/3.jpg', usage_instructions: 'third' },
            { image: 'https://example.com/1.jpg', usage_instructions: '' },
            { image: 'https://example.com/2.jpg', usage_instructions: 'second' },
          ],
        },
      );
      const rows = await imageRows(c.id);
      expect(rows.map((r) => [r.position, r.image])).toEqual([
        [0, 'https://example.com/3.jpg'],
        [1, 'https://example.com/1.jpg'],
        [2, 'https://example.com/2.jpg'],
      ]);
      // Back to one image: the old rows are gone.
      await expectPatched(
        c.id,
        { images: [{ image: 'https://example.com/only.jpg', usage_instructions: 'only' }] },
        {
          images: [{ image: 'https://example.com/only.jpg', usage_instructions: 'only' }],
        },
      );
      expect(await imageRows(c.id)).toHaveLength(1);
    });

    // Which values each field takes is the concepts' rule (test/rules/concepts.test.ts, "what a
    // concept’s fields may be"); here, that a refusal is a 400 {message} naming the field as REST spells it.
    it.each([
      ['images', { images: [] }],
      ['images[1].image', { images: [{ image: 'https://example.com/ok.jpg' }, { image: 42 }] }],
      ['images[0].usage_instructions', { images: [{ image: 'https://example.com/ok.jpg', usage_instructions: 'x'.repeat(2001) }] }],
      ['usage_instructions', { usage_instructions: 'x'.repeat(5001) }],
    ])('refuses a bad %s with 400 {message} naming it, changing nothing', async (field, bad) => {
      const c = await concept(alice);
      const valid = field === 'name' ? { usage_instructions: 'SHOULD NOT APPLY' } : { name: 'SHOULD NOT APPLY' };
      await expectRejected(c.id, { ...valid, ...bad }, 400, { field });
    });

    it('attaches the concept to one of my agents, and detaches it with null', async () => {
      const c = await concept(alice);
      const a1 = await f.agent(alice);
      const a2 = await f.agent(alice, { public: false });
      await expectPatched(c.id, { agent: a1.id }, { agent: a1.id });
      await expectPatched(c.id, { agent: a2.id }, { agent: a2.id });
      await expectPatched(c.id, { agent: null }, { agent: null });
    });

    it("refuses someone else's agent (public or not) or an unknown agent with 400 naming agent", async () => {
      const mine = await f.agent(alice);
      const c = await concept(alice, { agent: mine.id });
      const bobsPublic = await f.agent(bob, { public: true });
      const bobsPrivate = await f.agent(bob, { public: false });
      for (const agent of [bobsPublic.id, bobsPrivate.id, 'no-such-agent']) {
        await expectRejected(c.id, { name: 'SHOULD NOT APPLY', agent }, 400, { field: 'agent' });
      }
      expect((await read(c.id)).agent).toBe(mine.id);
    });

    it('refuses a non-owner with 403 {message}, also on a public concept, changing nothing', async () => {
      const pub = await concept(alice, {}, { public: true });
      await expectRejected(pub.id, { name: 'Hijacked', images: [{ image: 'https://evil.example.com/x.jpg' }] }, 403, { user: bob });
      const priv = await concept(alice);
      const res = await patch(priv.id, { name: 'Hijacked' }, bob);
      expectError(res, 403, 'message');
      expect((await read(priv.id)).name).toBe('Lighthouse look');
    });

    it('answers 404 {message:"Concept not found"} for an unknown concept', async () => {
      for (const id of ['nope', '5f1e2d3c4b5a697887766554']) {
        expectError(await patch(id, { name: 'Ghost' }), 404, 'message', NOT_FOUND);
      }
      expect(await t.db.concept.count({ where: { name: 'Ghost' } })).toBe(0);
    });

    it('refuses a body with no known fields with 400', async () => {
      const c = await concept(alice);
      await expectRejected(c.id, {}, 400);
      await expectRejected(c.id, { public: true, user: bob.id }, 400);
    });

    it.each([
      ['malformed JSON', '{"name":'],
      ['a JSON array', '[]'],
      ['JSON null', 'null'],
    ])('refuses %s with 400, changing nothing', async (_label, raw) => {
      const c = await concept(alice);
      await expectRejected(c.id, undefined, 400, { raw });
    });
  });
});
