/**
 * The agents service's front: what a transport or the composition takes from agents/ (its
 * rules, their inputs and how an agent's JSON fields read); the rest of the folder is its own.
 */
export { agentLlmSettings, agentModels, agentSuggestions, agentToolApproval, agentTools } from './fields.ts';
export type { ApprovalRule, ToolApproval } from '../tools/approval.ts';
export type { AgentLlmSettings, AgentMcpToolView, AgentModel, AgentSuggestion } from './fields.ts';
export { agentCreateSchema, agentPatchSchema, modelProfiles, ownerPaysValues, thinkingEffortCaps, thinkingPolicies } from './inputs.ts';
export { agentService, canReadAgent, visiblePersona } from './service.ts';
export type { AgentService, AgentWithKey } from './service.ts';
export { agentStore } from './store.ts';
