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
  llmSettings: llmSettingsSchema,
  // Which tools' calls wait for the owner's yes, and for how long (merged field by field, as llmSettings).
  toolApproval: toolApprovalSchema,
});

export const agentPatchSchema = agentFieldsSchema.partial();
export const agentCreateSchema = agentFieldsSchema.partial().required({ name: true, key: true });

export type AgentPatch = z.output<typeof agentPatchSchema>;
