import { z } from 'zod';
import { notFound } from '../domain/core/errors.ts';
import { toolDefinitionSchema, type ToolDefinition, type ToolParameter } from '../domain/tools/index.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { operation } from './operation.ts';

/** The original's SDK reads `error`, parley's other resources `message`: an unknown tool says both. */
const toolErrors: RestErrorStyle = { bodyKey: 'both' };

const definition = toolDefinitionSchema.shape;

/**
 * The original's clients know base models by a few short names (its SDK's `BaseModelName`);
 * the registry names the model itself. A model without a short name has no `base_model`, and
 * every tool that names one has its full name in `base_model_id`.
 */
const shortBaseModels = new Map([
  ['black-forest-labs/FLUX.1-dev', 'flux-dev'],
  ['black-forest-labs/FLUX.1-schnell', 'flux-schnell'],
  ['black-forest-labs/FLUX.1-Fill-dev', 'flux-dev'],
  ['stabilityai/stable-diffusion-xl-base-1.0', 'sdxl'],
  ['stabilityai/stable-diffusion-3-medium', 'sd3'],
  ['runwayml/stable-diffusion-v1-5', 'sd15'],
]);
export const sdkBaseModels = ['sdxl', 'sd3', 'sd15', 'flux', 'flux-dev', 'flux-schnell', 'flux_dev', 'JuggernautXL_v6'] as const;

const parameterTypes = definition.parameters.element.shape.type;

/**
 * A parameter as the registry defines it (`type`, `min`, `max`), and as the original's clients
 * read it: `schema`, `minimum`, `maximum`, `tip`, with null where nothing is set.
 */
const restToolParameterSchema = z
  .object({
    name: z.string(),
    label: z.string().meta({ description: 'The name when the registry gives no label' }),
    description: z.string(),
    tip: z.null(),
    type: parameterTypes,
    schema: z.object({ type: parameterTypes }),
    required: z.boolean(),
    default: z.unknown().meta({ description: 'null when the parameter has no default' }),
    min: z.number().optional(),
    max: z.number().optional(),
    minimum: z.number().nullable(),
    maximum: z.number().nullable(),
    step: z.number().nullable(),
    choices: z.array(z.union([z.string(), z.number()])).nullable(),
  })
  .meta({ id: 'ToolParameter' });

/** A registry file's public fields, with the rules the registry checks them by. */
export const restToolSchema = z
  .object({
    key: definition.key,
    name: definition.name,
    output_type: definition.output_type,
    active: z.boolean(),
    description: definition.description,
    cost_estimate: definition.cost_estimate.meta({
      description: 'Arithmetic over the parameters (+ - * /, min, max, ceil, floor): the manna a call costs',
    }),
    parameters: z.array(restToolParameterSchema),
    resolutions: z.array(z.string()),
    thumbnail: z.string().optional(),
    order: definition.order,
    base_model: z.enum(sdkBaseModels).optional().meta({ description: 'The short name of the base model, where it has one' }),
    base_model_id: z.string().optional().meta({ description: 'The base model as the registry names it' }),
  })
  .meta({ id: 'Tool' });

const toRestToolParameter = (p: ToolParameter): z.input<typeof restToolParameterSchema> => ({
  name: p.name,
  label: p.label ?? p.name,
  description: p.description,
  tip: null,
  type: p.type,
  schema: { type: p.type },
  required: p.required,
  default: p.default ?? null,
  ...(p.min === undefined ? {} : { min: p.min }),
  ...(p.max === undefined ? {} : { max: p.max }),
  minimum: p.min ?? null,
  maximum: p.max ?? null,
  step: p.step ?? null,
  choices: p.choices ?? null,
});

export const toRestTool = (t: ToolDefinition): z.input<typeof restToolSchema> => {
  const short = t.base_model === undefined ? undefined : shortBaseModels.get(t.base_model);
  return {
    key: t.key,
    name: t.name,
    output_type: t.output_type,
    active: t.active,
    description: t.description,
    cost_estimate: t.cost_estimate,
    parameters: t.parameters.map(toRestToolParameter),
    resolutions: t.resolutions,
    ...(t.thumbnail === undefined ? {} : { thumbnail: t.thumbnail }),
    order: t.order,
    ...(short === undefined ? {} : { base_model: short as (typeof sdkBaseModels)[number] }),
    ...(t.base_model === undefined ? {} : { base_model_id: t.base_model }),
  };
};

export const toolOperations = [
  operation({
    operationId: 'listTools',
    method: 'get',
    path: '/v2/tools',
    tag: 'Tools',
    summary: 'The tools agents can use, in display order',
    ok: { json: z.object({ tools: z.array(restToolSchema) }) },
    handler: async (_request, _reply, { services }) => ({ tools: services.tools.listAvailable().map(toRestTool) }),
  }),
  operation({
    operationId: 'getTool',
    method: 'get',
    path: '/v2/tools/:toolKey',
    tag: 'Tools',
    // The SDK's `tools.get`; a tool the list does not show is not found.
    summary: 'One tool of the list, by key',
    ok: { json: z.object({ tool: restToolSchema }) },
    errors: { style: toolErrors, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      const { toolKey } = request.params;
      const tool = services.tools.isAvailable(toolKey) ? services.tools.get(toolKey) : undefined;
      if (!tool) throw notFound('Tool not found');
      return { tool: toRestTool(tool) };
    },
  }),
];
