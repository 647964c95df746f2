import { z } from 'zod';
import { urlField } from '../core/validation.ts';
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

const schemas = new Map<string, z.ZodType<Record<string, unknown>>>();

/**
 * Checks a model's arguments against the tool's parameters (types, required, min/max, choices;
 * nothing unknown) and fills in defaults. Returns the arguments, or why they are wrong.
 */
export function checkArguments(tool: ToolDefinition, raw: string): { args: Record<string, unknown> } | { error: string } {
  let parsed: unknown;
  try {
    parsed = raw.trim() === '' ? {} : JSON.parse(raw);
  } catch {
    return { error: 'The arguments are not valid JSON' };
  }
  let schema = schemas.get(tool.key);
  if (!schema) {
    schema = z.strictObject(Object.fromEntries(tool.parameters.map((p) => [p.name, parameterSchema(p)]))) as z.ZodType<
      Record<string, unknown>
    >;
    schemas.set(tool.key, schema);
  }
  const result = schema.safeParse(parsed);
  if (result.success) return { args: result.data };
  const issue = result.error.issues[0]!;
  const where = issue.path.join('.');
  const unknownKey = issue.code === 'unrecognized_keys' ? `unknown argument "${issue.keys[0]}"` : null;
  return { error: unknownKey ?? (where ? `${where}: ${issue.message}` : issue.message) };
}
