/**
 * Seals and opens secrets for one row, as deployments' secrets are (`src/secrets/`): the same
 * sealer, handed in by the composition.
 */
export interface Sealer {
  readonly problem: string | null;
  seal(plain: string, boundTo: string): string;
  open(sealed: string, boundTo: string): string;
}

/** Where and how to reach one server: its URL and every header to send, the authorization opened. */
export interface McpEndpoint {
  id: string;
  url: string;
  headers: Record<string, string>;
  /** Changes whenever the server's settings do: a connection made with others is not used again. */
  version: string;
}

/** A tool a server offers, as `tools/list` gave it. */
export interface McpTool {
  name: string;
  title: string | null;
  description: string;
  /** The JSON Schema of its arguments (an object's). */
  inputSchema: Record<string, unknown>;
}

/** What a tool call gave: its text, its images (base64), and whether the tool said it failed. */
export interface McpCallResult {
  isError: boolean;
  text: string;
  images: { data: string; mimeType: string }[];
}

/** A progress notification of a call under way. */
export interface McpProgress {
  progress: number;
  total: number | null;
  message: string | null;
}

/** Why a server could not be used, in words for its owner (never a driver's raw text or a header). */
export class McpServerFailed extends Error {}

/**
 * Talks to users' MCP servers through the MCP SDK's client (`src/outbound/`): the domain opens
 * no connection itself. The adapter checks the URL again at each connection, with every address
 * its host resolves to, and bounds what a server may send and how long it may take.
 */
export interface McpClients {
  /** The server's tools, kept for a while and refreshed when the server says they changed; throws `McpServerFailed`. */
  tools(endpoint: McpEndpoint): Promise<McpTool[]>;
  /**
   * Calls one of the server's tools, with at most the timeout for an answer; `onProgress` hears
   * its progress notifications as they come. A failure to get an answer (no answer, too much,
   * malformed) throws `McpServerFailed`; a tool that fails answers `isError`.
   */
  call(
    endpoint: McpEndpoint,
    tool: string,
    args: Record<string, unknown>,
    options: { signal: AbortSignal; onProgress?(progress: McpProgress): void },
  ): Promise<McpCallResult>;
  /**
   * Why `args` do not fit the tool's input schema (JSON Schema, checked by a maintained
   * validator), or null when they do; also a reason when the schema itself cannot be used.
   */
  check(tool: McpTool, args: Record<string, unknown>): string | null;
  /** Drops what is kept of a server (it was changed or deleted) and closes its connection. */
  forget(id: string): void;
}
