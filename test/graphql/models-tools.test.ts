import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { toolsDir, type TestApp, type TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError } from './support.ts';
import { expectError, expectRejectsBadKeys, isoDate, creatorRef } from '../helpers/rest-helpers.ts';

/**
 * Models and tools on the wire, GraphQL then REST (the rules: test/rules/models.test.ts). One file
 * for the domain's transports, over one app: each test reads models of its own.
 */

const ModelsGet = graphql(`
  query ModelsGet($id: ID!) {
    model(id: $id) { rawId name baseModel loraTriggerText checkpoint thumbnail public args owner { rawId username } createdAt }
  }
`);
const ToolsList = graphql(`
  query ToolsList {
    tools { key name description outputType active costEstimate parameters resolutions thumbnail order baseModel }
  }
`);
const ToolsOfCreation = graphql(`
  query ToolsOfCreation($id: ID!) {
    creation(id: $id) { rawId toolKey tool { key name outputType order } }
  }
`);

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

describe('models and tools over GraphQL', () => {
  describe('model(id)', () => {
    it('a public model is readable by anyone, with its owner', async () => {
      const model = await f.model(alice, { public: true, name: 'Public LoRA' });
      const read = expectData(await t.gql(ModelsGet, { id: model.id }, bob.apiKey)).model;
      expect(read).toMatchObject({
        rawId: model.id,
        name: 'Public LoRA',
        baseModel: 'flux-dev',
        loraTriggerText: 'tok',
        checkpoint: null,
        public: true,
        args: {},
        owner: { rawId: alice.id, username: 'alice' },
      });
    });

    it("another user's private model is FORBIDDEN", async () => {
      const model = await f.model(alice, { public: false, name: 'Hidden LoRA' });
      const response = await t.gql(ModelsGet, { id: model.id }, bob.apiKey);
      expect(response.data).toBeNull();
      expectGraphQLError(response, 'FORBIDDEN');
      expect(JSON.stringify(response)).not.toContain('Hidden LoRA');
    });

    it('an unknown id is NOT_FOUND', async () => {
      const response = await t.gql(ModelsGet, { id: 'no-such-model' }, alice.apiKey);
      expect(response.data).toBeNull();
      expect(expectGraphQLError(response, 'NOT_FOUND').path).toEqual(['model']);
    });
  });

  describe('tools', () => {
    /** What the registry files say, read independently of the service. */
    async function registryFiles() {
      const files = (await readdir(toolsDir)).filter((n) => n.endsWith('.yaml'));
      return Promise.all(files.map(async (n) => parseYaml(await readFile(join(toolsDir, n), 'utf8')) as Record<string, any>));
    }

    it('lists exactly the active, visible tools, sorted by order', async () => {
      const tools = expectData(await t.gql(ToolsList, {}, alice.apiKey)).tools;
      const expected = (await registryFiles())
        .filter((d) => d.active !== false && d.visible !== false)
        .sort((a, b) => a.order - b.order)
        .map((d) => d.key);
      expect(tools.map((tool) => tool.key)).toEqual(expected);

      const orders = tools.map((tool) => tool.order);
      expect(orders).toEqual([...orders].sort((a, b) => a - b));
      expect(tools.every((tool) => tool.active)).toBe(true);
      // sdxl is inactive and prompt_enhance is hidden in tools/.
      expect(tools.map((tool) => tool.key)).not.toContain('sdxl');
      expect(tools.map((tool) => tool.key)).not.toContain('prompt_enhance');
      expect(tools.length).toBeGreaterThanOrEqual(5);
    });

    it('gives each tool its key, name, output type, cost estimate, parameters and resolutions', async () => {
      const tools = expectData(await t.gql(ToolsList, {}, alice.apiKey)).tools;
      const flux = tools.find((tool) => tool.key === 'flux_dev');
      expect(flux).toMatchObject({
        key: 'flux_dev',
        name: 'FLUX.1 [dev]',
        outputType: 'image',
        active: true,
        order: 10,
        costEstimate: 'n_samples * max(1, num_inference_steps / 28)',
        resolutions: ['1024x1024', '1152x896', '896x1152', '1344x768', '768x1344'],
        baseModel: 'black-forest-labs/FLUX.1-dev',
        thumbnail: 'https://cdn.parley.dev/tools/flux_dev.jpg',
      });
      expect(Array.isArray(flux!.parameters)).toBe(true);
      const parameters = flux!.parameters as Record<string, unknown>[];
      expect(parameters.map((p) => p.name)).toEqual(['prompt', 'n_samples', 'num_inference_steps', 'guidance_scale', 'seed', 'resolution']);
      expect(parameters[0]).toMatchObject({ name: 'prompt', type: 'string', required: true });
      expect(parameters[1]).toMatchObject({ name: 'n_samples', type: 'integer', default: 1, min: 1, max: 4 });
      // The size a caller may pick is one of the tool's resolutions.
      expect(parameters[5]).toMatchObject({ name: 'resolution', type: 'string', default: '1024x1024', choices: flux!.resolutions });

      for (const tool of tools) {
        expect(typeof tool.name).toBe('string');
        expect(['image', 'video', 'audio', 'text', 'lora']).toContain(tool.outputType);
        expect(tool.costEstimate.length).toBeGreaterThan(0);
        expect(Array.isArray(tool.parameters) && (tool.parameters as unknown[]).length > 0).toBe(true);
        expect(Array.isArray(tool.resolutions)).toBe(true);
      }
      // A tool without resolutions lists none rather than null.
      expect(tools.find((tool) => tool.key === 'flux_lora_trainer')!.resolutions).toEqual([]);
    });
  });

  describe('Creation.tool', () => {
    it("resolves the registry tool for the creation's tool key", async () => {
      const creation = await f.creation(alice, { tool: 'wan_t2v' });
      const read = expectData(await t.gql(ToolsOfCreation, { id: creation.id }, alice.apiKey)).creation;
      expect(read).toEqual({
        rawId: creation.id,
        toolKey: 'wan_t2v',
        tool: { key: 'wan_t2v', name: expect.any(String), outputType: 'video', order: 40 },
      });
    });

    it('is null for a tool key that is not in the registry', async () => {
      const creation = await f.creation(alice, { tool: 'retired_tool' });
      const read = expectData(await t.gql(ToolsOfCreation, { id: creation.id }, alice.apiKey)).creation;
      expect(read.toolKey).toBe('retired_tool');
      expect(read.tool).toBeNull();
    });
  });
});

describe('GET /v2/models/{id}', () => {
  const fullModel = (owner: TestUser, isPublic: boolean) =>
    t.db.model.create({
      data: {
        userId: owner.id,
        name: 'Lighthouse LoRA',
        baseModel: 'flux-dev',
        checkpoint: 'https://cdn.example.com/lighthouse.safetensors',
        thumbnail: 'https://cdn.example.com/lighthouse.jpg',
        loraTriggerText: 'LHTOK',
        public: isPublic,
        args: { steps: 1000, rank: 16, images: ['a.jpg', 'b.jpg'] },
      },
    });

  /** The training task the original's clients read, derived from the model. */
  const task = (id: string, user: TestUser, args: unknown) => ({
    _id: id,
    user: creatorRef(user),
    tool: 'lora_training',
    output_type: 'lora',
    args,
    status: 'completed',
    error: null,
    result: [],
    createdAt: isoDate,
    updatedAt: isoDate,
  });

  it('answers 401 {error} for missing, malformed and unknown keys', async () => {
    const model = await f.model(alice, { public: true });
    expect(await expectRejectsBadKeys(t, 'GET', `/v2/models/${model.id}`)).toBe(true);
  });

  it("returns another user's public model with every field", async () => {
    const model = await fullModel(alice, true);
    const res = await t.rest('GET', `/v2/models/${model.id}`, { key: bob.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      model: {
        _id: model.id,
        id: model.id,
        name: 'Lighthouse LoRA',
        slug: 'alice/lighthouse-lora',
        user: creatorRef(alice),
        userId: alice.id,
        task: task(model.id, alice, { steps: 1000, rank: 16, images: ['a.jpg', 'b.jpg'] }),
        base_model: 'flux-dev',
        checkpoint: 'https://cdn.example.com/lighthouse.safetensors',
        thumbnail: 'https://cdn.example.com/lighthouse.jpg',
        lora_trigger_text: 'LHTOK',
        public: true,
        deleted: false,
        args: { steps: 1000, rank: 16, images: ['a.jpg', 'b.jpg'] },
        createdAt: isoDate,
        updatedAt: isoDate,
      },
    });
    expect(new Date(res.body.model.createdAt).getTime()).toBe(model.createdAt.getTime());
  });

  it('returns null for unset optional fields', async () => {
    const model = await f.model(alice, { public: true, name: 'Bare' });
    const res = await t.rest('GET', `/v2/models/${model.id}`, { key: alice.apiKey });
    expect(res.status).toBe(200);
    expect(res.body.model).toEqual({
      _id: model.id,
      id: model.id,
      name: 'Bare',
      slug: 'alice/bare',
      user: creatorRef(alice),
      userId: alice.id,
      task: task(model.id, alice, {}),
      base_model: 'flux-dev',
      checkpoint: null,
      thumbnail: null,
      lora_trigger_text: 'tok',
      public: true,
      deleted: false,
      args: {},
      createdAt: isoDate,
      updatedAt: isoDate,
    });
  });

  it("refuses another user's private model with 401 {message}", async () => {
    const model = await fullModel(alice, false);
    const res = await t.rest('GET', `/v2/models/${model.id}`, { key: bob.apiKey });
    expectError(res, 401, 'message');
    expect(res.body.message).not.toContain('Lighthouse');
  });

  it.each([['nope'], ['5f1e2d3c4b5a697887766554'], ['01890a5d-ac96-774b-bcce-b302099a8057'], ['a%00b']])(
    'answers 404 {message:"Model not found"} for unknown id %s',
    async (id) => {
      expectError(await t.rest('GET', `/v2/models/${id}`, { key: alice.apiKey }), 404, 'message', 'Model not found');
    },
  );
});
