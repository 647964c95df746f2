import {
  agentLlmSettings,
  agentModels,
  agentSuggestions,
  agentToolApproval,
  agentTools,
  type ApprovalRule,
  type AgentLlmSettings,
  type AgentModel,
  type AgentSuggestion,
  canReadAgent,
  type ToolApproval,
  visiblePersona,
} from '../../domain/agents/index.ts';
import type { Agent as AgentRow } from '../../generated/prisma/client.ts';
import { builder } from '../builder.ts';
import { maybeViewer, viewerOf, type GraphQLContext } from '../context.ts';
import { AgentMcpToolInput } from './agent-mcp-tool.ts';
import { ModelProfileEnum, OwnerPaysEnum, ThinkingEffortCapEnum, ThinkingPolicyEnum } from './enums.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

const AgentModelRef = builder.objectRef<AgentModel>('AgentModel').implement({
  description: 'A LoRA the agent may use, and when.',
  fields: (t) => ({ lora: t.exposeString('lora'), useWhen: t.exposeString('useWhen') }),
});

const SuggestionRef = builder.objectRef<AgentSuggestion>('Suggestion').implement({
  fields: (t) => ({ label: t.exposeString('label'), prompt: t.exposeString('prompt') }),
});

const LlmSettingsRef = builder.objectRef<AgentLlmSettings>('LlmSettings').implement({
  fields: (t) => ({
    modelProfile: t.string({ nullable: true, resolve: (s) => s.modelProfile ?? null }),
    thinkingPolicy: t.string({ nullable: true, resolve: (s) => s.thinkingPolicy ?? null }),
    thinkingEffortCap: t.string({ nullable: true, resolve: (s) => s.thinkingEffortCap ?? null }),
    thinkingEffortInstructions: t.string({ nullable: true, resolve: (s) => s.thinkingEffortInstructions ?? null }),
  }),
});

const ToolApprovalRuleRef = builder.objectRef<[string, ApprovalRule]>('ToolApprovalRule').implement({
  description: "A tool whose calls wait for the agent's owner to approve them: always, or when they cost more than aboveManna.",
  fields: (t) => ({
    tool: t.string({ description: 'The tool key.', resolve: ([tool]) => tool }),
    always: t.boolean({ resolve: ([, rule]) => rule === 'always' }),
    aboveManna: t.float({ nullable: true, resolve: ([, rule]) => (rule === 'always' ? null : rule.above) }),
  }),
});

const ToolApprovalRef = builder.objectRef<ToolApproval>('ToolApproval').implement({
  description: "Which tools' calls wait for the owner's approval, and how long one waits before it counts as denied.",
  fields: (t) => ({
    rules: t.field({ type: [ToolApprovalRuleRef], resolve: (s) => Object.entries(s.tools) }),
    timeoutSeconds: t.exposeInt('timeoutSeconds'),
  }),
});

export const Agent = builder.prismaObject('Agent', {
  interfaces: nodeInterfaces,
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Agent', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    key: t.string({
      description: 'Unique handle of the agent (its creator username).',
      select: { user: { select: { username: true } } },
      resolve: (a) => a.user.username,
    }),
    name: t.exposeString('name'),
    description: t.exposeString('description'),
    image: t.exposeString('image', { nullable: true }),
    public: t.exposeBoolean('public'),
    models: t.field({ type: [AgentModelRef], resolve: agentModels }),
    persona: t.string({
      nullable: true,
      description: 'Null unless the persona is public or you own the agent.',
      resolve: (a, _, ctx) => visiblePersona(maybeViewer(ctx), a),
    }),
    isPersonaPublic: t.exposeBoolean('isPersonaPublic'),
    greeting: t.exposeString('greeting'),
    knowledge: t.exposeString('knowledge'),
    voice: t.exposeString('voice', { nullable: true }),
    suggestions: t.field({ type: [SuggestionRef], resolve: agentSuggestions }),
    ownerPays: t.expose('ownerPays', { type: OwnerPaysEnum }),
    tools: t.field({ type: 'JSON', description: 'Tool key → enabled.', resolve: agentTools }),
    llmSettings: t.field({ type: LlmSettingsRef, resolve: agentLlmSettings }),
    toolApproval: t.field({ type: ToolApprovalRef, resolve: agentToolApproval }),
    owner: t.relation('owner'),
    creator: t.relation('user', { description: 'The creator profile of the agent itself.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

/**
 * What a relation to an agent shows: someone else's private agent reads as null, as
 * `agent(id)` refuses it, so no path through the graph reaches its fields.
 */
export const readableAgent = (ctx: GraphQLContext, agent: AgentRow | null | undefined) =>
  agent && canReadAgent(maybeViewer(ctx), agent) ? agent : null;

const AgentModelInput = builder.inputType('AgentModelInput', {
  fields: (t) => ({ lora: t.string({ required: true }), useWhen: t.string() }),
});
const SuggestionInput = builder.inputType('SuggestionInput', {
  fields: (t) => ({ label: t.string({ required: true }), prompt: t.string({ required: true }) }),
});
const LlmSettingsInput = builder.inputType('LlmSettingsInput', {
  fields: (t) => ({
    modelProfile: t.field({ type: ModelProfileEnum }),
    thinkingPolicy: t.field({ type: ThinkingPolicyEnum }),
    thinkingEffortCap: t.field({ type: ThinkingEffortCapEnum }),
    thinkingEffortInstructions: t.string(),
  }),
});

const ToolApprovalRuleInput = builder.inputType('ToolApprovalRuleInput', {
  fields: (t) => ({
    tool: t.string({ required: true }),
    aboveManna: t.float({ description: 'Ask only when a call costs more than this; without it, ask for every call.' }),
  }),
});
const ToolApprovalInput = builder.inputType('ToolApprovalInput', {
  fields: (t) => ({
    rules: t.field({ type: [ToolApprovalRuleInput], description: 'Replaces the rules as a whole; [] asks for none.' }),
    timeoutSeconds: t.int({ description: 'How long a call waits for an answer (5 s to a week; 600 unless set).' }),
  }),
});

type ApprovalInput = { rules?: { tool: string; aboveManna?: number | null }[] | null; timeoutSeconds?: number | null } | null | undefined;

/** The input's list of rules as the domain keeps them, by tool key; what is left unsaid stays unsaid (the domain checks values). */
const toDomainApproval = (input: ApprovalInput) =>
  input && {
    ...(input.rules && {
      tools: Object.fromEntries(
        input.rules.map((r) => [r.tool, r.aboveManna === null || r.aboveManna === undefined ? 'always' : { above: r.aboveManna }]),
      ),
    }),
    ...(input.timeoutSeconds !== undefined && { timeoutSeconds: input.timeoutSeconds }),
  };

/** Field checks (lengths, limits, references) happen once, in the domain's zod schema. */
const agentInputFields = (required: boolean) =>
  builder.inputType(required ? 'CreateAgentInput' : 'UpdateAgentInput', {
    fields: (t) => ({
      name: t.string({ required }),
      key: t.string({ required }),
      description: t.string(),
      image: t.string(),
      public: t.boolean(),
      models: t.field({ type: [AgentModelInput] }),
      persona: t.string(),
      isPersonaPublic: t.boolean(),
      greeting: t.string(),
      knowledge: t.string(),
      voice: t.string(),
      suggestions: t.field({ type: [SuggestionInput] }),
      ownerPays: t.field({ type: OwnerPaysEnum }),
      tools: t.field({ type: 'JSON' }),
      mcpTools: t.field({
        type: [AgentMcpToolInput],
        description: 'Tools of your MCP servers to enable: the whole list, replacing the one before.',
      }),
      llmSettings: t.field({ type: LlmSettingsInput }),
      toolApproval: t.field({ type: ToolApprovalInput }),
    }),
  });
const CreateAgentInput = agentInputFields(true);
const UpdateAgentInput = agentInputFields(false);

builder.queryField('agent', (t) =>
  t.prismaField({
    type: 'Agent',
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, { id }, ctx) => ctx.services.agents.get(viewerOf(ctx), String(id), query),
  }),
);

builder.mutationFields((t) => ({
  createAgent: t.prismaField({
    type: 'Agent',
    args: { input: t.arg({ type: CreateAgentInput, required: true }) },
    resolve: (query, _root, { input }, ctx) =>
      ctx.services.agents.create(viewerOf(ctx), { ...input, toolApproval: toDomainApproval(input.toolApproval) }, query),
  }),
  deleteAgent: t.boolean({
    description: 'Deletes an agent you own with its triggers, deployments and memories; sessions keep its messages and go on without it.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => {
      await ctx.services.agents.delete(viewerOf(ctx), String(id));
      return true;
    },
  }),
  updateAgent: t.prismaField({
    type: 'Agent',
    description: 'Changes only the fields given; llmSettings is merged field by field.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateAgentInput, required: true }) },
    resolve: (query, _root, { id, input }, ctx) =>
      ctx.services.agents.update(viewerOf(ctx), String(id), { ...input, toolApproval: toDomainApproval(input.toolApproval) }, query),
  }),
}));
