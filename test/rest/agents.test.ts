import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { expectError, expectRejectsBadKeys, isoDate, creatorRef } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';

const NOT_FOUND = 'Agent not found';
const KEY_TAKEN = 'An agent with this key already exists';

describe('REST agents', () => {
  let t: TestApp;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;
  let bob: TestUser;
  let seq = 0;
  const uniqueKey = (prefix = 'agent') => `${prefix}-${Date.now().toString(36)}-${++seq}`;

  setUp(async (start) => {
    t = await start.app();
    f = fixtures(t);
    alice = await t.createUser('alice');
    bob = await t.createUser('bob');
  });

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
      expect(theirs).toEqual({ ...mine, persona: null });
    });

    it("shows another user's public agent with a public persona in full", async () => {
      const { agent } = await richAgent(alice, { isPersonaPublic: true });
      const theirs = await read(agent.id, bob);
      expect(theirs.persona).toBe('You are a painter.');
      expect(theirs).toEqual(await read(agent.id, alice));
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
