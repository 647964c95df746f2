import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.ts';
import { loadToolRegistry } from '../../src/domain/tools/registry.ts';
import { testConfig, toolsDir, type TestApp, type TestUser } from '../helpers/app.ts';
import { expectRejectsBadKeys } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';

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

describe('GET /v2/tools', () => {
  let t: TestApp;
  let alice: TestUser;
  let files: Record<string, any>[];

  setUp(async (start) => {
    t = await start.app();
    alice = await t.createUser('alice');
    const names = (await readdir(toolsDir)).filter((n) => n.endsWith('.yaml'));
    files = await Promise.all(names.map(async (n) => parseYaml(await readFile(join(toolsDir, n), 'utf8'))));
  });

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

describe('tool registry validation', () => {
  const dirs: string[] = [];
  const valid = async () => readFile(join(toolsDir, 'flux_schnell.yaml'), 'utf8');

  /** A temp dir holding a valid tool plus the given files. */
  async function registryDir(extra: Record<string, string>) {
    const dir = await mkdtemp(join(tmpdir(), 'parley-tools-'));
    dirs.push(dir);
    await writeFile(join(dir, 'flux_schnell.yaml'), await valid());
    for (const [name, text] of Object.entries(extra)) await writeFile(join(dir, name), text);
    return dir;
  }

  afterAll(async () => {
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });

  const tool = (key: string, fields: Record<string, string> = {}) => {
    const lines: Record<string, string> = {
      key,
      name: 'Broken tool',
      description: 'A tool for tests.',
      output_type: 'image',
      order: '5',
      cost_estimate: '"1 * n_samples"',
      parameters: '\n  - name: n_samples\n    type: integer\n    description: How many.\n    default: 1',
      ...fields,
    };
    return (
      Object.entries(lines)
        .filter(([, v]) => v !== '')
        .map(([k, v]) => `${k}: ${v}`)
        .join('\n') + '\n'
    );
  };

  it('loads a valid directory', async () => {
    const dir = await registryDir({ 'good_tool.yaml': tool('good_tool') });
    const registry = await loadToolRegistry(dir);
    expect(registry.listAvailable().map((x) => x.key)).toEqual(['good_tool', 'flux_schnell']);
    expect(registry.get('good_tool')?.parameters[0]).toEqual({
      name: 'n_samples',
      type: 'integer',
      description: 'How many.',
      default: 1,
      required: false,
    });
  });

  it.each([
    ['an unknown output_type', 'holo_tool.yaml', tool('holo_tool', { output_type: 'hologram' }), ['output_type']],
    [
      'a cost_estimate over an unknown variable',
      'cost_tool.yaml',
      tool('cost_tool', { cost_estimate: '"2 * steps_count"' }),
      ['cost_estimate', 'steps_count'],
    ],
    [
      'a cost_estimate with an unknown function',
      'fn_tool.yaml',
      tool('fn_tool', { cost_estimate: '"sqrt(n_samples)"' }),
      ['cost_estimate', 'sqrt'],
    ],
    [
      'a cost_estimate that does not parse',
      'syntax_tool.yaml',
      tool('syntax_tool', { cost_estimate: '"2 * (n_samples"' }),
      ['cost_estimate'],
    ],
    [
      'a cost_estimate over a parameter without a numeric default',
      'nodefault_tool.yaml',
      tool('nodefault_tool', { parameters: '\n  - name: n_samples\n    type: integer\n    description: How many.' }),
      ['cost_estimate', 'n_samples', 'numeric default'],
    ],
    [
      'a cost_estimate that is infinite with the defaults',
      'inf_tool.yaml',
      tool('inf_tool', { cost_estimate: '"1 / (n_samples - 1)"' }),
      ['cost_estimate', 'Infinity'],
    ],
    [
      'a cost_estimate that is negative with the defaults',
      'neg_tool.yaml',
      tool('neg_tool', { cost_estimate: '"2 - 3 * n_samples"' }),
      ['cost_estimate', '-1'],
    ],
    ['a key that does not match the file name', 'named_tool.yaml', tool('other_name'), ['key', 'other_name']],
    ['a missing name', 'noname_tool.yaml', tool('noname_tool', { name: '' }), ['name']],
    ['an order that is not a number', 'order_tool.yaml', tool('order_tool', { order: 'first' }), ['order']],
    [
      'a parameter of an unknown type',
      'param_tool.yaml',
      tool('param_tool', {
        parameters:
          '\n  - name: n_samples\n    type: integer\n    description: ok\n  - name: shape\n    type: polygon\n    description: bad',
      }),
      ['parameters[1].type'],
    ],
    ['a bad resolution', 'res_tool.yaml', tool('res_tool', { resolutions: '["big"]' }), ['resolutions[0]']],
    ['an unknown field', 'extra_tool.yaml', tool('extra_tool', { colour: 'red' }), ['colour']],
    ['invalid YAML', 'yaml_tool.yaml', 'key: yaml_tool\nname: [unclosed\n  description: x: y\n', ['YAML']],
    ['an empty file', 'empty_tool.yaml', '', ['(file)']],
  ])('refuses %s, naming the file and the field', async (_label, file, text, mentions) => {
    const dir = await registryDir({ [file]: text });
    const error = await loadToolRegistry(dir).then(
      () => null,
      (e: Error) => e,
    );
    expect(error, 'loading should fail').toBeInstanceOf(Error);
    expect(error!.message).toContain(file);
    for (const word of mentions) expect(error!.message).toContain(word);
    expect(error!.message).not.toContain('flux_schnell');
  });

  it('refuses two files that define the same key (.yaml and .yml)', async () => {
    const dir = await registryDir({
      'dup_tool.yaml': tool('dup_tool', { name: 'First' }),
      'dup_tool.yml': tool('dup_tool', { name: 'Second' }),
    });
    await expect(loadToolRegistry(dir)).rejects.toThrow(/dup_tool/);
  });

  it('refuses a directory without tool files, and a missing directory', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'parley-tools-'));
    dirs.push(empty);
    await writeFile(join(empty, 'README.md'), '# not a tool');
    await expect(loadToolRegistry(empty)).rejects.toThrow(empty);
    await expect(loadToolRegistry(join(empty, 'missing'))).rejects.toThrow('missing');
  });

  it('stops buildApp (start-up) when a tool file is broken', async () => {
    const dir = await registryDir({ 'holo_tool.yaml': tool('holo_tool', { output_type: 'hologram' }) });
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
});
