/** The SDK's MCP client as a browser page loads it: bundled by `test/mcp/http-headers.test.ts`. */
export { Client } from '@modelcontextprotocol/sdk/client/index.js';
export { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
