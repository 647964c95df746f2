import type { ChatTool } from './providers/types.ts';

/** A tool call the model asked for, assembled from the streamed pieces. */
export interface RequestedToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface ToolRunContext {
  sessionId: string;
  promptId: string;
  messageId: string;
  agentId: string;
  /** The user whose prompt is being answered. */
  userId: string;
  /** What the reply has written so far, kept with the tool calls it asked for. */
  content: string;
  signal: AbortSignal;
}

/**
 * Where tools plug into the reply engine: what the model is offered, and how the calls of one
 * model call are run. Each result goes back to the model as a `tool` message.
 */
export interface ToolHost {
  offer(agentId: string, enabled: Record<string, boolean>): ChatTool[];
  run(calls: RequestedToolCall[], context: ToolRunContext): Promise<{ id: string; content: string }[]>;
}

/** No tools: a model that asks for one anyway is told it does not exist. */
export const noTools: ToolHost = {
  offer: () => [],
  run: async (calls) => calls.map((c) => ({ id: c.id, content: JSON.stringify({ error: `There is no tool named "${c.name}"` }) })),
};

/** What an agent remembers about a user between sessions. */
export interface MemoryHost {
  recall(agentId: string, userId: string): Promise<string[]>;
  /** Called after a finished exchange that was not excluded from memory. */
  remember(exchange: { agentId: string; userId: string; sessionId: string; prompt: string; reply: string }): Promise<void>;
}

export const noMemory: MemoryHost = { recall: async () => [], remember: async () => {} };
