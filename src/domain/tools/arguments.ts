import { z } from 'zod';
import { nestsWithin, TOO_DEEP, urlField } from '../core/validation.ts';
import type { ToolDefinition, ToolParameter } from './definition.ts';

/** JSON Schema of a tool's parameters, as models are offered it (OpenAI function calling). */
export function parametersJsonSchema(tool: ToolDefinition): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (const p of tool.parameters) {
    const type = { integer: 'integer', float: 'number', boolean: 'boolean', array: 'array' }[p.type as string] ?? 'string';
    properties[p.name] = {
      type,
      description: p.description,
      ...(['image', 'video', 'audio'].includes(p.type) ? { format: 'uri' } : {}),
      ...(p.choices ? { enum: p.choices } : {}),
      ...(p.min !== undefined ? { minimum: p.min } : {}),
      ...(p.max !== undefined ? { maximum: p.max } : {}),
      ...(p.default !== undefined ? { default: p.default } : {}),
      ...(type === 'array' ? { items: {} } : {}),
    };
  }
  return {
    type: 'object',
    properties,
    required: tool.parameters.filter((p) => p.required).map((p) => p.name),
    additionalProperties: false,
  };
}

function parameterSchema(p: ToolParameter): z.ZodType {
  let schema: z.ZodType;
  if (p.choices) {
    schema = z.union(p.choices.map((c) => z.literal(c)) as [z.ZodLiteral, z.ZodLiteral], {
      error: `must be one of ${p.choices.join(', ')}`,
    });
  } else if (p.type === 'integer' || p.type === 'float') {
    let n = z.number({ error: 'must be a number' });
    if (p.type === 'integer') n = n.int('must be a whole number');
    if (p.min !== undefined) n = n.min(p.min, `must be at least ${p.min}`);
    if (p.max !== undefined) n = n.max(p.max, `must be at most ${p.max}`);
    schema = n;
  } else if (p.type === 'boolean') schema = z.boolean({ error: 'must be true or false' });
  else if (p.type === 'array') schema = z.array(z.unknown(), { error: 'must be a list' });
  else if (['image', 'video', 'audio'].includes(p.type)) schema = urlField;
  else schema = z.string({ error: 'must be text' }).max(10_000, 'must be at most 10000 characters');
  if (p.default !== undefined) return schema.default(p.default as never);
  return p.required ? schema : schema.optional();
}

// Keyed by the definition, not its key: apps in one process (a test worker, an embedder) may each
// define a tool of the same key with other parameters.
const schemas = new WeakMap<ToolDefinition, z.ZodType<Record<string, unknown>>>();

/** A tool's parameters as one schema (types, required, min/max, choices; nothing unknown), made once per tool. */
function argumentsSchema(tool: ToolDefinition) {
  let schema = schemas.get(tool);
  if (!schema) {
    schema = z.strictObject(Object.fromEntries(tool.parameters.map((p) => [p.name, parameterSchema(p)]))) as z.ZodType<
      Record<string, unknown>
    >;
    schemas.set(tool, schema);
  }
  return schema;
}

/**
 * Checks arguments against the tool's parameters and fills in defaults. Returns the arguments,
 * or the first thing wrong with them and the argument it is about (`path`, empty when it is the
 * arguments as a whole).
 */
export function checkArgumentValues(
  tool: ToolDefinition,
  values: unknown,
): { args: Record<string, unknown> } | { path: (string | number)[]; message: string } {
  // Before anything walks them: a list argument takes any JSON, and is stored and sent on.
  if (!nestsWithin(values)) return { path: [], message: TOO_DEEP };
  const result = argumentsSchema(tool).safeParse(values);
  if (result.success) return { args: result.data };
  const issue = result.error.issues[0]!;
  if (issue.code === 'unrecognized_keys') return { path: [], message: `unknown argument "${issue.keys[0]}"` };
  return { path: issue.path.filter((p): p is string | number => typeof p !== 'symbol'), message: issue.message };
}

/**
 * Checks a model's arguments (JSON text) against the tool's parameters and fills in defaults.
 * Returns the arguments, or why they are wrong, in words for the model.
 */
export function checkArguments(tool: ToolDefinition, raw: string): { args: Record<string, unknown> } | { error: string } {
  let parsed: unknown;
  try {
    parsed = raw.trim() === '' ? {} : JSON.parse(raw);
  } catch {
    return { error: 'The arguments are not valid JSON' };
  }
  const checked = checkArgumentValues(tool, parsed);
  if ('args' in checked) return checked;
  const where = checked.path.join('.');
  return { error: where ? `${where}: ${checked.message}` : checked.message };
}
