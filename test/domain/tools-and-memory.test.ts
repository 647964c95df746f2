import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { factKey, factsByRule, factsFromAnswer } from '../../src/domain/memories/extract.ts';
import { checkArguments, parametersJsonSchema } from '../../src/domain/tools/arguments.ts';
import { costOf } from '../../src/domain/tools/cost-of.ts';
import { toolDefinitionSchema } from '../../src/domain/tools/definition.ts';
import { imageSize, paint } from '../../src/domain/tools/executors/image.ts';
import { loadToolRegistry, type ToolRegistry } from '../../src/domain/tools/registry.ts';

let registry: ToolRegistry;
beforeAll(async () => {
  registry = await loadToolRegistry(fileURLToPath(new URL('../../tools', import.meta.url)));
});

describe('tool arguments and costs', () => {
  it('offers each parameter with its type, bounds, choices and default, and nothing else', () => {
    const schema = parametersJsonSchema(registry.get('prompt_enhance')!);
    expect(schema).toEqual({
      type: 'object',
      required: ['prompt'],
      additionalProperties: false,
      properties: {
        prompt: { type: 'string', description: expect.any(String) },
        target: { type: 'string', description: expect.any(String), enum: ['image', 'video', 'music'], default: 'image' },
        image: { type: 'string', description: expect.any(String), format: 'uri' },
        max_tokens: { type: 'integer', description: expect.any(String), minimum: 50, maximum: 500, default: 200 },
      },
    });
  });

  it('fills defaults and refuses what the parameters do not allow, naming the argument', () => {
    const flux = registry.get('flux_dev')!;
    expect(checkArguments(flux, '{"prompt":"a kite"}')).toEqual({
      args: { prompt: 'a kite', n_samples: 1, num_inference_steps: 28, guidance_scale: 3.5, resolution: '1024x1024' },
    });
    expect(checkArguments(flux, '{}')).toEqual({ error: expect.stringMatching(/^prompt: /) });
    expect(checkArguments(flux, '{"prompt":"x","n_samples":1.5}')).toEqual({ error: 'n_samples: must be a whole number' });
    expect(checkArguments(flux, '{"prompt":"x","num_inference_steps":5}')).toEqual({ error: 'num_inference_steps: must be at least 10' });
    expect(checkArguments(flux, '{"prompt":"x","resolution":"10x10"}')).toEqual({
      error: expect.stringMatching(/^resolution: must be one of 1024x1024/),
    });
    expect(checkArguments(flux, '["prompt"]')).toEqual({ error: expect.any(String) });
    expect(checkArguments(registry.get('prompt_enhance')!, '{"prompt":"x","image":"javascript:alert(1)"}')).toEqual({
      error: expect.stringMatching(/^image: /),
    });
  });

  it('prices a call by the tool expression over its arguments, in exact decimals', () => {
    const flux = registry.get('flux_dev')!;
    const at = (json: string) => costOf(flux, (checkArguments(flux, json) as { args: Record<string, unknown> }).args).toString();
    expect(at('{"prompt":"x"}')).toBe('1');
    expect(at('{"prompt":"x","n_samples":3,"num_inference_steps":50}')).toBe('5.3571');
    expect(costOf(registry.get('creations_search')!, { query: 'x', limit: 5 }).toString()).toBe('0');
  });

  it("checks and prices by each registry's own definition when two in one process share a key", () => {
    // Two apps in one process (a test worker, a service embedding parley) each with a tool "flux_dev".
    const own = toolDefinitionSchema.parse({
      key: 'flux_dev',
      name: 'Flux, as another registry defines it',
      description: 'One picture at a flat price.',
      output_type: 'image',
      order: 1,
      cost_estimate: '7',
      parameters: [{ name: 'prompt', type: 'string', description: 'What to paint.', required: true }],
      handler: 'text',
    });
    const shipped = registry.get('flux_dev')!;
    const args = '{"prompt":"x","n_samples":2}';
    expect(checkArguments(shipped, args)).toEqual({ args: expect.objectContaining({ n_samples: 2 }) });
    expect(checkArguments(own, args)).toEqual({ error: 'unknown argument "n_samples"' });
    expect(checkArguments(shipped, args)).toEqual({ args: expect.objectContaining({ n_samples: 2 }) });
    expect(costOf(shipped, { n_samples: 1, num_inference_steps: 28 }).toString()).toBe('1');
    expect(costOf(own, { prompt: 'x' }).toString()).toBe('7');
  });
});

describe('the offline painter', () => {
  it('paints the same picture for the same prompt and seed, and another for another seed', () => {
    const a = paint('a lighthouse in a storm', 7, 64, 48);
    expect([a.width, a.height]).toEqual([64, 48]);
    expect(paint('a lighthouse in a storm', 7, 64, 48).data.equals(a.data)).toBe(true);
    expect(paint('a lighthouse in a storm', 8, 64, 48).data.equals(a.data)).toBe(false);
  });
  it('is sized by resolution, or width and height, within bounds', () => {
    expect(imageSize({ resolution: '1344x768' }, ['1024x1024'])).toEqual({ width: 1344, height: 768 });
    expect(imageSize({}, ['896x1152'])).toEqual({ width: 896, height: 1152 });
    expect(imageSize({ width: 300, height: 99999 }, [])).toEqual({ width: 300, height: 2048 });
  });
});

describe('memory extraction', () => {
  it('offline: what people say about themselves, by rule', () => {
    expect(
      factsByRule('Hi! My name is Zoe Martin. I live in Lyon, near the river. I prefer warm colours and I am allergic to peanuts.'),
    ).toEqual(['Their name is Zoe Martin', 'Lives in Lyon', 'Prefers warm colours']);
    expect(factsByRule('I am allergic to peanuts but I love hazelnuts.')).toEqual(['Is allergic to peanuts', 'Likes hazelnuts']);
    expect(factsByRule("I'm a vegetarian. I don't like cilantro.")).toEqual(['Is a vegetarian', 'Does not like cilantro']);
    expect(factsByRule('What is the weather like?')).toEqual([]);
  });
  it("from a model's answer: one short fact per line, NONE for nothing", () => {
    expect(factsFromAnswer('- Prefers warm colours.\n2) Works as an illustrator\n\n')).toEqual([
      'Prefers warm colours',
      'Works as an illustrator',
    ]);
    expect(factsFromAnswer('NONE')).toEqual([]);
    expect(factKey('Prefers  warm colours!')).toBe(factKey('prefers warm COLOURS'));
  });
});
