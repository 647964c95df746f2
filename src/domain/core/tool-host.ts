import type { ChatTool } from './chat.ts';

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
  signal: AbortSignal;
}

/** Tool calls saved (pending) and ready to run. */
export interface RecordedCalls {
  /** Runs them (in parallel); each result goes back to the model as a `tool` message. */
  run(): Promise<{ id: string; content: string }[]>;
}

/**
 * Where tools plug into the reply engine: what the model is offered, and the calls of one model
 * call, saved first (the engine then shows the reply with them) and run after.
 */
export interface ToolHost {
  /** `withMcp`: the agent has tools of MCP servers enabled (without, none is looked for). */
  offer(agentId: string, enabled: Record<string, boolean>, withMcp: boolean): Promise<ChatTool[]>;
  record(calls: RequestedToolCall[], context: ToolRunContext): Promise<RecordedCalls>;
}

/** No tools: a model that asks for one anyway is told it does not exist. */
export const noTools: ToolHost = {
  offer: async () => [],
  record: async (calls) => ({
    run: async () => calls.map((c) => ({ id: c.id, content: JSON.stringify({ error: `There is no tool named "${c.name}"` }) })),
  }),
};

/** What an agent remembers about a user between sessions. */
export interface MemoryHost {
  recall(agentId: string, userId: string): Promise<string[]>;
  /** Called after a finished exchange that was not excluded from memory; given up when `signal` aborts. */
  remember(
    exchange: { agentId: string; userId: string; sessionId: string; prompt: string; reply: string },
    signal?: AbortSignal,
  ): Promise<void>;
}

export const noMemory: MemoryHost = { recall: async () => [], remember: async () => {} };
