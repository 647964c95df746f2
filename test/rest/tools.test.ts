import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.ts';
import { testConfig, toolsDir, type TestApp, type TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { expectRejectsBadKeys } from '../helpers/rest-helpers.ts';
import { newSession, settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { httpTool } from '../helpers/tool-registry.ts';

const SPEC_FIELDS = [
  'key',
  'name',
  'output_type',
  'active',
  'description',
  'cost_estimate',
  'parameters',
  'resolutions',
  'thumbnail',
  'order',
  'base_model',
].sort();

// The app as it starts with nothing configured: the tools of tools/*.yaml, and no model to ask.
let t: TestApp;
let alice: TestUser;
let painter: { id: string };
let files: Record<string, any>[];

setUp(async (start) => {
  t = await start.app();
  alice = await t.createUser('alice');
  await t.services.manna.grant('alice', '10', 'forever');
  painter = await fixtures(t).agent(alice, { name: 'Painter', key: 'painter', tools: { flux_schnell: true } });
  const names = (await readdir(toolsDir)).filter((n) => n.endsWith('.yaml'));
  files = await Promise.all(names.map(async (n) => parseYaml(await readFile(join(toolsDir, n), 'utf8'))));
});

describe('GET /v2/tools', () => {
  it('answers 401 {error} for missing, malformed and unknown keys', async () => {
    expect(await expectRejectsBadKeys(t, 'GET', '/v2/tools')).toBe(true);
  });

  it('lists exactly the active and visible tools of tools/*.yaml, sorted by order', async () => {
    const res = await t.rest('GET', '/v2/tools', { key: alice.apiKey });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(['tools']);
    const keys = res.body.tools.map((tool: any) => tool.key);

    const expected = files
      .filter((y) => y.active !== false && y.visible !== false)
      .sort((a, b) => a.order - b.order || a.key.localeCompare(b.key))
      .map((y) => y.key);
    expect(keys).toEqual(expected);
    expect(keys).not.toContain('sdxl'); // inactive
    expect(keys).not.toContain('prompt_enhance'); // hidden
    const orders = res.body.tools.map((tool: any) => tool.order);
    expect(orders).toEqual([...orders].sort((a, b) => a - b));
    expect(keys.length).toBeGreaterThanOrEqual(8);
    for (const type of ['image', 'video', 'audio', 'text']) {
      expect(
        res.body.tools.some((tool: any) => tool.output_type === type),
        `a tool with output_type ${type}`,
      ).toBe(true);
    }
  });

  /** The original's SDK knows base models by these short names; the registry's full names map to them. */
  const SHORT_BASE_MODELS: Record<string, string> = {
    'black-forest-labs/FLUX.1-dev': 'flux-dev',
    'black-forest-labs/FLUX.1-schnell': 'flux-schnell',
    'black-forest-labs/FLUX.1-Fill-dev': 'flux-dev',
    'stabilityai/stable-diffusion-xl-base-1.0': 'sdxl',
  };

  it('gives each tool the spec fields (base_model only where it has a short name), with the values from its file', async () => {
    const res = await t.rest('GET', '/v2/tools', { key: alice.apiKey });
    expect(res.status).toBe(200);
    for (const tool of res.body.tools) {
      const y = files.find((file) => file.key === tool.key)!;
      const short = SHORT_BASE_MODELS[y.base_model];
      const expectedKeys = SPEC_FIELDS.filter((k) => (k === 'base_model' ? short : k === 'thumbnail' ? y.thumbnail : true));
      expect(Object.keys(tool).sort(), tool.key).toEqual([...expectedKeys, ...(y.base_model ? ['base_model_id'] : [])].sort());
      expect(tool).toEqual({
        key: y.key,
        name: y.name,
        output_type: y.output_type,
        active: true,
        description: y.description,
        cost_estimate: y.cost_estimate,
        parameters: y.parameters.map((p: any) => ({
          ...p,
          label: p.label ?? p.name,
          required: p.required ?? false,
          default: p.default ?? null,
          tip: null,
          schema: { type: p.type },
          minimum: p.min ?? null,
          maximum: p.max ?? null,
          step: p.step ?? null,
          choices: p.choices ?? null,
        })),
        resolutions: y.resolutions ?? [],
        ...(y.thumbnail ? { thumbnail: y.thumbnail } : {}),
        order: y.order,
        ...(short ? { base_model: short } : {}),
        ...(y.base_model ? { base_model_id: y.base_model } : {}),
      });
      expect(typeof tool.cost_estimate).toBe('string');
      expect(Array.isArray(tool.parameters) && tool.parameters.length > 0).toBe(true);
      expect(tool.resolutions.every((r: unknown) => typeof r === 'string')).toBe(true);
    }
    // Tools on FLUX and SDXL carry the short names integrations of the original compare against.
    expect(res.body.tools.find((tool: any) => tool.key === 'flux_dev').base_model).toBe('flux-dev');
    expect(res.body.tools.find((tool: any) => tool.key === 'flux_schnell').base_model).toBe('flux-schnell');
  });
});

/** With nothing configured, asking an agent in so many words for a picture still makes one. */
describe('the offline responder with tools', () => {
  it('calls the agent’s image tool with the user’s words and links the result, honestly offline', async () => {
    const id = await newSession(t, alice, [painter.id], { content: 'Please draw a cat asleep on a stack of zines' });
    const reply = (await settledSession(t, alice, id)).messages.at(-1);
    expect(reply.tool_calls).toEqual([
      expect.objectContaining({
        tool: 'flux_schnell',
        status: 'completed',
        cost: 0.25,
        args: expect.objectContaining({ prompt: 'Please draw a cat asleep on a stack of zines' }),
      }),
    ]);
    const url = reply.tool_calls[0].result.images[0].url;
    expect(reply.content).toContain('answering offline');
    expect(reply.content).toContain(url);
    expect((await fetch(url)).headers.get('content-type')).toBe('image/png');
    expect((await t.rest('GET', '/v2/creators/me', { key: alice.apiKey })).body.balance).toBe(9.75);
  });

  it('answers from the profile when nobody asks for a picture', async () => {
    const id = await newSession(t, alice, [painter.id], { content: 'What do you think of riso printing?' });
    const reply = (await settledSession(t, alice, id)).messages.at(-1);
    expect(reply.tool_calls).toEqual([]);
    expect(reply.content).toMatch(/^I'm Painter, answering offline/);
  });
});

describe('start-up with a broken tool file', () => {
  // What a tool file must say is the registry's rule (test/domain/tool-registry.test.ts); here,
  // that the app refuses to start on a directory holding a broken one, naming the file and field.
  let dir: string;
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('stops buildApp (start-up) when a tool file is broken', async () => {
    dir = await mkdtemp(join(tmpdir(), 'parley-tools-'));
    const valid = await readFile(join(toolsDir, 'flux_schnell.yaml'), 'utf8');
    await writeFile(join(dir, 'flux_schnell.yaml'), valid);
    await writeFile(
      join(dir, 'holo_tool.yaml'),
      valid.replace('key: flux_schnell', 'key: holo_tool').replace('output_type: image', 'output_type: hologram'),
    );
    const started = buildApp(testConfig({ kind: 'pglite', dataDir: undefined }, { toolsDir: dir }));
    const outcome = await started.then(
      async (app) => {
        await app.close();
        return null;
      },
      (e: Error) => e,
    );
    expect(outcome).toBeInstanceOf(Error);
    expect(outcome!.message).toContain('holo_tool.yaml');
    expect(outcome!.message).toContain('output_type');
  });

  it('stops start-up when a tool is served at an address the outbound rules refuse, naming the file, the field and why', async () => {
    dir = await mkdtemp(join(tmpdir(), 'parley-tools-'));
    await writeFile(join(dir, 'flux_schnell.yaml'), await readFile(join(toolsDir, 'flux_schnell.yaml'), 'utf8'));
    await writeFile(join(dir, 'inside_tool.yaml'), httpTool('inside_tool', 'https://169.254.169.254/latest/meta-data'));
    const config = testConfig(
      { kind: 'pglite', dataDir: undefined },
      { toolsDir: dir, outbound: { allowHttp: false, allowPrivate: false } },
    );
    const outcome = await buildApp(config).then(
      async (app) => {
        await app.close();
        return null;
      },
      (e: Error) => e,
    );
    expect(outcome?.message).toBe(
      `Tool registry: ${relative(process.cwd(), join(dir, 'inside_tool.yaml'))}: handler.http: its host 169.254.169.254 resolves to 169.254.169.254, a loopback, private, link-local or metadata address (OUTBOUND_ALLOW_HTTP and OUTBOUND_ALLOW_PRIVATE allow a tool service over http or on a private network: docs/outbound.md)`,
    );
  });
});
