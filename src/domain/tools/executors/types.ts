import type { ToolDefinition } from '../definition.ts';

export interface ToolRun {
  tool: ToolDefinition;
  /** Checked against the tool's parameters, with defaults filled in. */
  args: Record<string, unknown>;
  /** The user whose prompt this is: whose creations the outputs become, whose search it is. */
  userId: string;
  agentId: string;
  sessionId: string;
  signal: AbortSignal;
}

/** A file a tool made, to become a creation of the user. */
export interface MediaOutput {
  /** The creation's id (files are named after it). */
  id: string;
  name: string;
  url: string;
  thumbnail: string | null;
  filename: string | null;
  mediaAttributes: Record<string, unknown>;
}

export interface ToolOutput {
  /** What the model is told. */
  result: unknown;
  media?: MediaOutput[];
}

export type Executor = (run: ToolRun) => Promise<ToolOutput>;

/** A tool failure whose message the model and the user may see (a bad input, a service down). */
export class ToolError extends Error {
  override name = 'ToolError';
}
