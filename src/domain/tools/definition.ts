import { z } from 'zod';
import { costVariables, evaluateCost, parseCost } from './cost.ts';

const parameterSchema = z
  .object({
    name: z.string().regex(/^[a-z][a-z0-9_]*$/, 'must be snake_case'),
    type: z.enum(['string', 'integer', 'float', 'boolean', 'image', 'video', 'audio', 'lora', 'array']),
    label: z.string().optional(),
    description: z.string().min(1),
    required: z.boolean().default(false),
    default: z.unknown().optional(),
    min: z.number().optional(),
    max: z.number().optional(),
    step: z.number().positive().optional(),
    choices: z
      .array(z.union([z.string(), z.number()]))
      .min(1)
      .optional(),
  })
  .strict()
  .refine((p) => p.min === undefined || p.max === undefined || p.min <= p.max, { message: 'min must not exceed max', path: ['min'] });

/**
 * Who runs a tool: one of the executors built into the service, or a service elsewhere that is
 * sent the arguments over HTTP. A tool without a handler is listed but never offered to agents.
 */
const handlerSchema = z.union([
  z.enum(['image', 'text', 'search', 'countdown']),
  z
    .object({
      http: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }),
      timeout_ms: z.number().int().positive().default(60_000),
      retries: z.number().int().min(0).max(5).default(2),
    })
    .strict(),
]);
export type ToolHandler = z.output<typeof handlerSchema>;

/** The shape of one file in the tool registry (`tools/<key>.yaml`). */
export const toolDefinitionSchema = z
  .object({
    key: z.string().regex(/^[a-z0-9][a-z0-9_-]*$/, 'must be lowercase letters, digits, "_" or "-"'),
    name: z.string().min(1),
    description: z.string().min(1),
    output_type: z.enum(['image', 'video', 'audio', 'text', 'lora']),
    base_model: z.string().optional(),
    thumbnail: z.string().url().optional(),
    active: z.boolean().default(true),
    visible: z.boolean().default(true),
    order: z.number().int(),
    cost_estimate: z.string().min(1),
    resolutions: z.array(z.string().regex(/^\d+x\d+$/, 'must look like 1024x768')).default([]),
    parameters: z.array(parameterSchema).min(1),
    handler: handlerSchema.optional(),
  })
  .strict()
  .superRefine((tool, ctx) => {
    const names = new Set<string>();
    tool.parameters.forEach((p, i) => {
      if (names.has(p.name)) ctx.addIssue({ code: 'custom', message: `duplicate parameter "${p.name}"`, path: ['parameters', i, 'name'] });
      names.add(p.name);
    });
    // The estimate must price a call made with the defaults: every variable a numeric
    // parameter with a numeric default, and the result a finite, non-negative amount.
    let cost;
    try {
      cost = parseCost(tool.cost_estimate);
    } catch (e) {
      ctx.addIssue({ code: 'custom', message: (e as Error).message, path: ['cost_estimate'] });
      return;
    }
    const defaults: Record<string, number> = {};
    for (const v of costVariables(cost)) {
      const parameter = tool.parameters.find((p) => p.name === v);
      if (!parameter)
        return void ctx.addIssue({ code: 'custom', message: `uses "${v}", which is not a parameter`, path: ['cost_estimate'] });
      if (typeof parameter.default !== 'number') {
        return void ctx.addIssue({ code: 'custom', message: `uses "${v}", which needs a numeric default`, path: ['cost_estimate'] });
      }
      defaults[v] = parameter.default;
    }
    const atDefaults = evaluateCost(cost, defaults);
    if (!Number.isFinite(atDefaults) || atDefaults < 0) {
      ctx.addIssue({
        code: 'custom',
        message: `comes to ${atDefaults} with the default arguments; it must be a finite amount of at least 0`,
        path: ['cost_estimate'],
      });
    }
  });

export type ToolDefinition = z.output<typeof toolDefinitionSchema>;
export type ToolParameter = ToolDefinition['parameters'][number];
