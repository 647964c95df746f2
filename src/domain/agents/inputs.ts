import { z } from 'zod';
import { OwnerPays } from '../core/vocabulary.ts';
import { usernameSchema } from '../creators/service.ts';
import { nameField, text, urlField } from '../core/validation.ts';
import { toolApprovalSchema } from '../tools/approval.ts';

/**
 * Agent input as the domain sees it (camelCase). The spec lists one value per enum; we accept
 * the original service's wider sets too (docs/decisions.md).
 */
export const modelProfiles = ['low', 'medium', 'high'] as const;
export const thinkingPolicies = ['auto', 'off', 'always'] as const;
export const thinkingEffortCaps = ['low', 'medium', 'high'] as const;
export const ownerPaysValues = Object.values(OwnerPays);
export const MAX_AGENT_MODELS = 10;
/** MCP tools one agent may have enabled: the model is offered each as a function. */
export const MAX_AGENT_MCP_TOOLS = 64;

/** A tool of one of the owner's MCP servers, by the name its server lists it under. */
const agentMcpToolSchema = z.object({
  serverId: z.string().min(1, 'must name one of your MCP servers'),
  tool: z.string().min(1, 'must name a tool of the server').max(128),
});

export const llmSettingsSchema = z
  .object({
    modelProfile: z.enum(modelProfiles),
    thinkingPolicy: z.enum(thinkingPolicies),
    thinkingEffortCap: z.enum(thinkingEffortCaps),
    thinkingEffortInstructions: text(2000),
  })
  .partial();

const agentModelSchema = z.object({
  lora: z.string().min(1, 'must name a model').max(100),
  useWhen: text(1000).default(''),
});

const suggestionSchema = z.object({ label: z.string().min(1).max(100), prompt: z.string().min(1).max(1000) });

/** Every writable agent field; all optional, as in a PATCH. */
export const agentFieldsSchema = z.object({
  name: nameField,
  key: usernameSchema,
  description: text(2000),
  image: urlField.nullable(),
  public: z.boolean(),
  // More than the limit is a 422 in the original (a limit, not a malformed value).
  models: z.array(agentModelSchema).refine((m) => m.length <= MAX_AGENT_MODELS, {
    message: `must have at most ${MAX_AGENT_MODELS} models`,
    params: { status: 422 },
  }),
  persona: text(20000),
  isPersonaPublic: z.boolean(),
  greeting: text(2000),
  knowledge: text(100000),
  voice: text(100).nullable(),
  suggestions: z.array(suggestionSchema).max(10, 'must have at most 10 suggestions'),
  ownerPays: z.enum(OwnerPays),
  tools: z.record(z.string(), z.boolean({ error: 'must be true or false (tool enabled)' })),
  /** Replaces the whole list when given. */
  mcpTools: z
    .array(agentMcpToolSchema)
    .max(MAX_AGENT_MCP_TOOLS, `must have at most ${MAX_AGENT_MCP_TOOLS} MCP tools`)
    .refine((list) => new Set(list.map((t) => `${t.serverId}\n${t.tool}`)).size === list.length, 'names a tool twice'),
  llmSettings: llmSettingsSchema,
  // Which tools' calls wait for the owner's yes, and for how long (merged field by field, as llmSettings).
  toolApproval: toolApprovalSchema,
});

export const agentPatchSchema = agentFieldsSchema.partial();
export const agentCreateSchema = agentFieldsSchema.partial().required({ name: true, key: true });

export type AgentPatch = z.output<typeof agentPatchSchema>;
