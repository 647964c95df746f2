import { z } from 'zod';
import {
  agentLlmSettings,
  agentModels,
  agentSuggestions,
  agentToolApproval,
  agentTools,
  agentCreateSchema,
  agentPatchSchema,
  modelProfiles,
  ownerPaysValues,
  thinkingEffortCaps,
  thinkingPolicies,
  visiblePersona,
  type AgentMcpToolView,
  type AgentWithKey,
} from '../domain/agents/index.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import { functionName } from '../domain/mcp-servers/index.ts';
import type { User } from '../generated/prisma/client.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { restCreatorRefSchema, toRestCreatorRef } from './creators.ts';
import { fieldNames } from './field-names.ts';
import { operation } from './operation.ts';

const names = fieldNames({
  ownerPays: 'owner_pays',
  llmSettings: 'llm_settings',
  useWhen: 'use_when',
  modelProfile: 'model_profile',
  thinkingPolicy: 'thinking_policy',
  thinkingEffortCap: 'thinking_effort_cap',
  thinkingEffortInstructions: 'thinking_effort_instructions',
  toolApproval: 'tool_approval',
  timeoutSeconds: 'timeout_seconds',
  mcpTools: 'mcp_tools',
  serverId: 'server_id',
});

/** The REST fields whose own keys are renamed too. */
const nestedFields = ['llm_settings', 'models', 'tool_approval', 'mcp_tools'];

/** Agents answer `{error}`, and 401 (not 403) when the caller is not the owner, as the original did. */
const errors: RestErrorStyle = { bodyKey: 'error', status: { FORBIDDEN: 401 }, fieldName: names.toRest };

export const restAgentSchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    key: z.string(),
    username: z.string().meta({ description: 'The same as key: an agent is a user whose username is its key' }),
    userImage: z.string().nullable().meta({ description: 'The same as image' }),
    type: z.literal('agent'),
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
    tools: z.record(z.string(), z.array(z.string())).meta({
      description: "The enabled tools, as the original's clients read them: tool key to a list (always empty here)",
    }),
    tools_enabled: z.record(z.string(), z.boolean()).meta({ description: 'Every tool setting as last written: true on, false off' }),
    tool_approval: z
      .object({
        tools: z.record(z.string(), z.union([z.literal('always'), z.object({ above: z.number() })])),
        timeout_seconds: z.number().int(),
      })
      .meta({
        description:
          "parley's extension: the tools whose calls wait for the owner's approval (`always`, or `{above}` a cost in manna) and how long a call waits (600 s unless set)",
      }),
    mcp_tools: z
      .array(
        z.object({
          server_id: z.string(),
          tool: z.string(),
          function_name: z.string().meta({ description: 'The name the model calls it by: its rule’s key in `tool_approval.tools`' }),
        }),
      )
      .nullable()
      .meta({ description: 'Tools of your MCP servers enabled on the agent (a parley extension); null unless you own the agent' }),
    llm_settings: z.object({
      model_profile: z.enum(modelProfiles).nullable(),
      thinking_policy: z.enum(thinkingPolicies).nullable(),
      thinking_effort_cap: z.enum(thinkingEffortCaps).nullable(),
      thinking_effort_instructions: z.string().nullable(),
    }),
    owner: restCreatorRefSchema,
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'Agent' });

/** An agent read with its owner's row, which REST shows populated. */
export type RestAgentRow = AgentWithKey & { owner: User; mcpTools: (AgentMcpToolView & { server: { name: string } })[] };
/** What `services.agents` is asked to load for a REST answer. */
export const restAgentQuery = {
  include: {
    owner: true as const,
    mcpTools: {
      orderBy: [{ serverId: 'asc' as const }, { tool: 'asc' as const }],
      include: { server: { select: { name: true as const } } },
    },
  },
};

export function toRestAgent(agent: RestAgentRow, viewer: Viewer): z.input<typeof restAgentSchema> {
  const llm = agentLlmSettings(agent);
  const tools = agentTools(agent);
  const approval = agentToolApproval(agent);
  return {
    _id: agent.id,
    id: agent.id,
    key: agent.user.username,
    username: agent.user.username,
    userImage: agent.image,
    type: 'agent',
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
    tools: Object.fromEntries(
      Object.entries(tools)
        .filter(([, on]) => on)
        .map(([key]) => [key, []]),
    ),
    tools_enabled: tools,
    tool_approval: { tools: approval.tools, timeout_seconds: approval.timeoutSeconds },
    mcp_tools:
      viewer.id === agent.ownerId
        ? agent.mcpTools.map((t) => ({ server_id: t.serverId, tool: t.tool, function_name: functionName(t.server.name, t.tool) }))
        : null,
    llm_settings: {
      model_profile: llm.modelProfile ?? null,
      thinking_policy: llm.thinkingPolicy ?? null,
      thinking_effort_cap: llm.thinkingEffortCap ?? null,
      thinking_effort_instructions: llm.thinkingEffortInstructions ?? null,
    },
    owner: toRestCreatorRef(agent.owner),
    createdAt: agent.createdAt,
    updatedAt: agent.updatedAt,
  };
}

/** `tools` as either client sends it: parley's switches, or the original's lists (each turns its tool on). */
const toolsInput = z
  .record(z.string(), z.union([z.boolean(), z.array(z.string())]))
  .optional()
  .meta({ description: "Tool key to true (on) or false (off); the original's list of strings also turns a tool on" });

export const agentOperations = [
  operation({
    operationId: 'createAgent',
    method: 'post',
    path: '/v2/agents',
    tag: 'Agents',
    summary: 'Create an agent (name and key required); it is private unless `public: true`',
    body: names.schema(agentCreateSchema).extend({ tools: toolsInput }),
    ok: { json: z.object({ agentId: z.string(), agent: restAgentSchema }) },
    created: true,
    errors: { style: errors, codes: ['BAD_USER_INPUT', 'CONFLICT', 'UNPROCESSABLE'] },
    handler: async (request, _reply, { services }) => {
      const input = names.toDomain(acceptToolLists(request.body ?? {}), nestedFields);
      const agent = (await services.agents.create(request.viewer, input, restAgentQuery)) as RestAgentRow;
      return { agentId: agent.id, agent: toRestAgent(agent, request.viewer) };
    },
  }),
  operation({
    operationId: 'deleteAgent',
    method: 'delete',
    path: '/v2/agents/:agentId',
    tag: 'Agents',
    summary: 'Delete an agent you own, with its triggers, deployments and memories; sessions keep its messages',
    ok: { json: z.object({ success: z.boolean() }) },
    errors: { style: errors, codes: ['FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      await services.agents.delete(request.viewer, request.params.agentId);
      return { success: true };
    },
  }),
  operation({
    operationId: 'getAgent',
    method: 'get',
    path: '/v2/agents/:agentId',
    tag: 'Agents',
    summary: 'An agent of yours, or a public one',
    ok: { json: z.object({ agent: restAgentSchema }) },
    errors: { style: errors, codes: ['FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      agent: toRestAgent(
        (await services.agents.get(request.viewer, request.params.agentId, restAgentQuery)) as RestAgentRow,
        request.viewer,
      ),
    }),
  }),
  operation({
    operationId: 'updateAgent',
    method: 'patch',
    path: '/v2/agents/:agentId',
    tag: 'Agents',
    summary: 'Update an agent you own (only the fields sent change)',
    body: names.schema(agentPatchSchema).extend({ tools: toolsInput }),
    ok: { json: z.object({ agentId: z.string(), agent: restAgentSchema }) },
    errors: { style: errors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT', 'CONFLICT', 'UNPROCESSABLE'] },
    handler: async (request, _reply, { services }) => {
      const input = names.toDomain(acceptToolLists(request.body), nestedFields);
      const agent = (await services.agents.update(request.viewer, request.params.agentId, input, restAgentQuery)) as RestAgentRow;
      // The spec's body is `{agentId}`; the original's SDK reads `{agent}`: both, so either client works.
      return { agentId: agent.id, agent: toRestAgent(agent, request.viewer) };
    },
  }),
];

/**
 * The original's clients send `tools` as a map from tool key to a list of strings; a listed tool
 * is enabled. Lists of strings become `true` here; anything else goes on to the domain's schema
 * unchanged, which refuses it with the field's name.
 */
function acceptToolLists(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !('tools' in body)) return body;
  const tools = (body as { tools: unknown }).tools;
  if (typeof tools !== 'object' || tools === null || Array.isArray(tools)) return body;
  const isStringList = (v: unknown) => Array.isArray(v) && v.every((s) => typeof s === 'string');
  return {
    ...body,
    tools: Object.fromEntries(Object.entries(tools).map(([key, value]) => [key, isStringList(value) ? true : value])),
  };
}
