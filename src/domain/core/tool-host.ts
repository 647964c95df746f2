import type { ChatTool } from './chat.ts';
import type { ToolCallView } from './events.ts';

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

/** What a call gives the model: its result (or why there is none) as a `tool` message's content. */
export interface ToolResult {
  id: string;
  content: string;
}

/** A call that waits for its payer's yes: saved `awaiting_approval`, with its price as its cost. */
export interface AwaitingCall {
  /** The model's own call, as asked. */
  call: RequestedToolCall;
  /** Its position among the reply's calls. */
  position: number;
  toolCall: ToolCallView;
  /** Who pays for it, and so who answers. */
  payer: string;
  /** How long it waits before it counts as denied (the agent's setting). */
  timeoutSeconds: number;
}

/** A round of calls: the results of those that ran (or were refused), and those that wait for approval. */
export interface RoundResults {
  results: ToolResult[];
  awaiting: AwaitingCall[];
}

/** A call of a paused round, as the reply keeps it until its approval is settled. */
export interface PausedCall {
  call: RequestedToolCall;
  taskId: string;
  position: number;
}

/** Tool calls saved (pending) and ready to run. */
export interface RecordedCalls {
  /**
   * Runs them (in parallel), but for those that must wait for approval; each result goes back to
   * the model as a `tool` message.
   */
  run(): Promise<RoundResults>;
}

/**
 * Where tools plug into the reply engine: what the model is offered, and the calls of one model
 * call, saved first (the engine then shows the reply with them) and run after; and the calls a
 * reply paused at, once their approvals are settled.
 */
export interface ToolHost {
  /** `withMcp`: the agent has tools of MCP servers enabled (without, none is looked for). */
  offer(agentId: string, enabled: Record<string, boolean>, withMcp: boolean): Promise<ChatTool[]>;
  record(calls: RequestedToolCall[], context: ToolRunContext): Promise<RecordedCalls>;
  /** Runs the approved ones (charged as any call); the others' results tell the model why not (denied, and why). */
  resume(calls: PausedCall[], context: ToolRunContext): Promise<ToolResult[]>;
}

const noSuchTool = (c: RequestedToolCall): ToolResult => ({
  id: c.id,
  content: JSON.stringify({ error: `There is no tool named "${c.name}"` }),
});

/** No tools: a model that asks for one anyway is told it does not exist. */
export const noTools: ToolHost = {
  offer: async () => [],
  record: async (calls) => ({ run: async () => ({ results: calls.map(noSuchTool), awaiting: [] }) }),
  resume: async (calls) => calls.map((c) => noSuchTool(c.call)),
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
