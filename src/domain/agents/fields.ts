import type { Agent } from '../../generated/prisma/client.ts';

/** Typed views of the agent's JSON columns (written only through the validated inputs). */
export interface AgentModel {
  lora: string;
  useWhen: string;
}
export interface AgentSuggestion {
  label: string;
  prompt: string;
}
export interface AgentLlmSettings {
  modelProfile?: string;
  thinkingPolicy?: string;
  thinkingEffortCap?: string;
  thinkingEffortInstructions?: string;
}

export const agentModels = (a: Pick<Agent, 'models'>) => a.models as unknown as AgentModel[];
export const agentSuggestions = (a: Pick<Agent, 'suggestions'>) => a.suggestions as unknown as AgentSuggestion[];
export const agentLlmSettings = (a: Pick<Agent, 'llmSettings'>) => a.llmSettings as AgentLlmSettings;
export const agentTools = (a: Pick<Agent, 'tools'>) => a.tools as Record<string, boolean>;
