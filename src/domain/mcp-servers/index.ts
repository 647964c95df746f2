/**
 * The MCP servers service's front: servers a user registers, whose tools their agents may call
 * in replies (`docs/mcp.md`, "Tools from MCP servers").
 */
export type { CreateMcpServerInput, UpdateMcpServerInput } from './inputs.ts';
export { functionName, mcpAgentTools } from './agent-tools.ts';
export { MCP_SERVER_NOT_FOUND, mcpEndpoint, type McpServerService, mcpServerService } from './service.ts';
export type { McpServerView } from './store.ts';
export {
  type McpCallResult,
  type McpClients,
  type McpEndpoint,
  type McpProgress,
  McpServerFailed,
  type McpTool,
  type Sealer,
} from './ports.ts';
export { mcpServerSealedRows, prismaMcpServerStore } from './prisma-store.ts';
