import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { agentLlmSettings, agentModels, agentSuggestions, agentTools } from '../domain/agents/fields.ts';
import { modelProfiles, ownerPaysValues, thinkingEffortCaps, thinkingPolicies } from '../domain/agents/inputs.ts';
import { visiblePersona, type AgentWithKey } from '../domain/agents/service.ts';
import type { Services } from '../domain/services.ts';
import type { Viewer } from '../domain/viewer.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { fieldNames } from './field-names.ts';

const names = fieldNames({
  ownerPays: 'owner_pays',
  llmSettings: 'llm_settings',
  useWhen: 'use_when',
  modelProfile: 'model_profile',
  thinkingPolicy: 'thinking_policy',
  thinkingEffortCap: 'thinking_effort_cap',
  thinkingEffortInstructions: 'thinking_effort_instructions',
});

/** Agents answer `{error}`, and 401 (not 403) when the caller is not the owner, as the original did. */
const errors: RestErrorStyle = { bodyKey: 'error', status: { FORBIDDEN: 401 }, fieldName: names.toRest };
/** For the OpenAPI description. */
export { errors as agentErrors, names as agentNames };

export const restAgentSchema = z
  .object({
    id: z.string(),
    key: z.string(),
    name: z.string(),
    description: z.string(),
    image: z.string().nullable(),
    public: z.boolean(),
    models: z.array(z.object({ lora: z.string(), use_when: z.string() })),
    persona: z.string().nullable().meta({ description: 'null unless you own the agent or isPersonaPublic' }),
    isPersonaPublic: z.boolean(),
    greeting: z.string(),
    knowledge: z.string(),
    voice: z.string().nullable(),
    suggestions: z.array(z.object({ label: z.string(), prompt: z.string() })),
    owner_pays: z.enum(ownerPaysValues),
    tools: z.record(z.string(), z.boolean()),
    llm_settings: z.object({
      model_profile: z.enum(modelProfiles).nullable(),
      thinking_policy: z.enum(thinkingPolicies).nullable(),
      thinking_effort_cap: z.enum(thinkingEffortCaps).nullable(),
      thinking_effort_instructions: z.string().nullable(),
    }),
    owner: z.string().meta({ description: "The owner's id" }),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'Agent' });

export function toRestAgent(agent: AgentWithKey, viewer: Viewer): z.input<typeof restAgentSchema> {
  const llm = agentLlmSettings(agent);
  return {
    id: agent.id,
    key: agent.user.username,
    name: agent.name,
    description: agent.description,
    image: agent.image,
    public: agent.public,
    models: agentModels(agent).map((m) => ({ lora: m.lora, use_when: m.useWhen })),
    persona: visiblePersona(viewer, agent),
    isPersonaPublic: agent.isPersonaPublic,
    greeting: agent.greeting,
    knowledge: agent.knowledge,
    voice: agent.voice,
    suggestions: agentSuggestions(agent),
    owner_pays: agent.ownerPays,
    tools: agentTools(agent),
    llm_settings: {
      model_profile: llm.modelProfile ?? null,
      thinking_policy: llm.thinkingPolicy ?? null,
      thinking_effort_cap: llm.thinkingEffortCap ?? null,
      thinking_effort_instructions: llm.thinkingEffortInstructions ?? null,
    },
    owner: agent.ownerId,
    createdAt: agent.createdAt,
    updatedAt: agent.updatedAt,
  };
}

export function agentRoutes(app: FastifyInstance, services: Services) {
  app.get<{ Params: { agentId: string } }>('/v2/agents/:agentId', { config: { errors } }, async (request) => ({
    agent: toRestAgent(await services.agents.get(request.viewer, request.params.agentId), request.viewer),
  }));

  app.patch<{ Params: { agentId: string } }>('/v2/agents/:agentId', { config: { errors } }, async (request) => {
    const input = names.toDomain(request.body, ['llm_settings', 'models']);
    const agent = await services.agents.update(request.viewer, request.params.agentId, input);
    return { agentId: agent.id };
  });
}
