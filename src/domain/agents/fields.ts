import type { z } from 'zod';
import { toolApprovalOf } from '../tools/approval.ts';
import type { llmSettingsSchema } from './inputs.ts';

/** Typed views of the agent's JSON columns (written only through the validated inputs). */
export interface AgentModel {
  lora: string;
  useWhen: string;
}
export interface AgentSuggestion {
  label: string;
  prompt: string;
}
/** As the input schema left it: settings are only ever written through it. */
export type AgentLlmSettings = z.output<typeof llmSettingsSchema>;

export const agentModels = (a: { models: unknown }) => a.models as AgentModel[];
export const agentSuggestions = (a: { suggestions: unknown }) => a.suggestions as AgentSuggestion[];
export const agentLlmSettings = (a: { llmSettings: unknown }) => a.llmSettings as AgentLlmSettings;
export const agentTools = (a: { tools: unknown }) => a.tools as Record<string, boolean>;
/** Which tools' calls wait for approval and how long, defaults filled in. */
export const agentToolApproval = (a: { toolApproval: unknown }) => toolApprovalOf(a.toolApproval);

/** An MCP server's tool enabled on an agent. */
export interface AgentMcpToolView {
  serverId: string;
  tool: string;
}
