import type { ToolDefinition } from '../definition.ts';

export interface ToolRun {
  tool: ToolDefinition;
  /** Checked against the tool's parameters, with defaults filled in. */
  args: Record<string, unknown>;
  /** The user whose prompt this is: whose creations the outputs become, whose search it is. */
  userId: string;
  /** The agent and session of a reply's call; null for a task made by itself. */
  agentId: string | null;
  sessionId: string | null;
  signal: AbortSignal;
  /** Told how far the run is, from 0 to 1 (`message`: what it is doing), where the runner follows it. */
  progress?: (fraction: number, message?: string) => void;
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

/** A tool served elsewhere, as its definition names it (`handler: {http, timeout_ms, retries}`). */
export interface ToolService {
  url: string;
  /** Per attempt. */
  timeoutMs: number;
  /** Further attempts after one that failed in a way another may not (a 5xx, a timeout, no connection). */
  retries: number;
}

/**
 * The port to tools served elsewhere: the executor that calls one. The composition root gives
 * the client (`src/executors/http.ts`); the domain knows only the protocol (`answer.ts`).
 */
export type ToolServiceClient = (service: ToolService) => Executor;

/** A tool failure whose message the model and the user may see (a bad input, a service down). */
export class ToolError extends Error {
  override name = 'ToolError';
}
