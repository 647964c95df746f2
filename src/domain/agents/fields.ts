import type { z } from 'zod';
import type { Agent } from '../../generated/prisma/client.ts';
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

export const agentModels = (a: Pick<Agent, 'models'>) => a.models as unknown as AgentModel[];
export const agentSuggestions = (a: Pick<Agent, 'suggestions'>) => a.suggestions as unknown as AgentSuggestion[];
export const agentLlmSettings = (a: Pick<Agent, 'llmSettings'>) => a.llmSettings as AgentLlmSettings;
export const agentTools = (a: Pick<Agent, 'tools'>) => a.tools as Record<string, boolean>;
