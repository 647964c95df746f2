import { z } from 'zod';
import { canNameARow } from '../core/ids.ts';
import { parseInput, text } from '../core/validation.ts';

/**
 * The discovery lists (agents, models, creations a viewer may see): each is the visibility rule
 * of its single-row lookup, narrowed by the filters a client sends. A filter never widens what
 * the rule allows, so `owner: someone` lists only that someone's public rows. Parsed here into
 * plain values; the stores turn them into statements (discovery/store.ts).
 */
const idField = z.string().min(1, 'must not be empty').max(200, 'must be at most 200 characters').refine(canNameARow, 'names no row');
const textFilter = text(200)
  .trim()
  .transform((s) => s || undefined);

const common = { owner: idField.optional(), public: z.boolean().optional(), text: textFilter.optional() };
export const agentFilterSchema = z.object(common);
export const modelFilterSchema = z.object({ ...common, baseModel: text(200).optional() });
export const creationFilterSchema = z.object({ ...common, agent: idField.optional(), tool: text(200).optional() });

export type AgentFilter = z.output<typeof agentFilterSchema>;
export type ModelFilter = z.output<typeof modelFilterSchema>;
export type CreationFilter = z.output<typeof creationFilterSchema>;

/** A filter as clients send it: GraphQL sends null for an omitted field, and for no filter at all. */
export type RawFilter<S extends z.ZodType> = { [K in keyof z.input<S>]?: z.input<S>[K] | null } | null | undefined;

/** The schemas read null as "no filter". */
const withoutNulls = (raw: Record<string, unknown> | null | undefined) =>
  Object.fromEntries(Object.entries(raw ?? {}).filter(([, v]) => v !== null && v !== undefined));

export const parseAgentFilter = (raw: RawFilter<typeof agentFilterSchema>): AgentFilter => parseInput(agentFilterSchema, withoutNulls(raw));
export const parseModelFilter = (raw: RawFilter<typeof modelFilterSchema>): ModelFilter => parseInput(modelFilterSchema, withoutNulls(raw));
export const parseCreationFilter = (raw: RawFilter<typeof creationFilterSchema>): CreationFilter =>
  parseInput(creationFilterSchema, withoutNulls(raw));
