import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadToolRegistry } from '../../src/domain/tools/registry.ts';

/**
 * The tool registry's rules, on files in a temporary directory: what a tool file must say, and
 * that a broken one is refused naming the file and the field. That the app will not start on such
 * a directory is test/rest/tools.test.ts's.
 */
const toolsDir = fileURLToPath(new URL('../../tools', import.meta.url));

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
});
