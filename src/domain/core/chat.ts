/** The chat-completions contract every provider speaks (OpenAI's message and tool shapes). */
export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: ChatToolCall[] }
  | { role: 'tool'; content: string; tool_call_id: string };

export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** A tool offered to the model, in the OpenAI function-calling format. */
export interface ChatTool {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/** Who is answering, for providers that answer from the agent's profile (the offline responder). */
export interface AgentProfile {
  name: string;
  key: string;
  description: string;
  greeting: string;
  knowledge: string;
  suggestions: { label: string; prompt: string }[];
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools: ChatTool[];
  maxTokens: number;
  /** Ask for visible reasoning at this effort, where the provider offers it. */
  reasoningEffort: 'low' | 'medium' | 'high' | null;
  agent: AgentProfile;
}

/** One piece of a streamed answer. */
export type ChatDelta =
  | { type: 'content'; text: string }
  | { type: 'reasoning'; text: string }
  /** Tool calls arrive in pieces: the first piece of each index has its id and name. */
  | { type: 'tool_call'; index: number; id?: string; name?: string; arguments?: string }
  | { type: 'usage'; promptTokens: number; completionTokens: number };

export interface ChatProvider {
  /** For the start-up line and /healthz: what answers, never a secret. */
  readonly description: string;
  /**
   * Streams an answer: each piece goes to `onDelta` as it arrives, and the promise settles when
   * the answer is complete (or failed). A throw from `onDelta` ends the call with that error, as
   * it is. Pushed rather than iterated: a chain of async iterators would cost promises and turns
   * of the event loop for every token of every reply.
   */
  stream(request: ChatRequest, signal: AbortSignal, onDelta: (delta: ChatDelta) => void): Promise<void>;
  /** The whole content of a short answer, not streamed (the service's own calls: titles, memories). */
  complete(request: ChatRequest, signal: AbortSignal): Promise<string>;
}

/** What went wrong with a provider call, for metrics. */
export type ProviderErrorKind =
  | 'timeout'
  | 'unreachable'
  | 'rate_limited'
  | 'server_error'
  | 'refused'
  | 'reported'
  | 'malformed'
  | 'interrupted';

/** A provider failure, worded for the user who sees it at the end of a broken reply. */
export class ProviderError extends Error {
  override name = 'ProviderError';
  constructor(
    message: string,
    /** Worth one retry if nothing has streamed yet (network, timeout, 5xx, 429). */
    readonly transient: boolean,
    readonly kind: ProviderErrorKind,
  ) {
    super(message);
  }
}
