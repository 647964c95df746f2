import { z } from 'zod';
import {
  mcpServerErrors as style,
  mcpServerNames,
  restMcpServerCreateBody,
  restMcpServerPatchBody,
  restMcpServerSchema,
  restMcpToolSchema,
  toRestMcpServer,
  toRestMcpTool,
} from './mcp-server-shapes.ts';
import { operation } from './operation.ts';

const TAG = 'MCP servers';
const one = z.object({ server: restMcpServerSchema });
const body = (raw: unknown) => mcpServerNames.toDomain(raw ?? {}) as never;

export const mcpServerOperations = [
  operation({
    operationId: 'createMcpServer',
    method: 'post',
    path: '/v2/mcp/servers',
    tag: TAG,
    summary: 'Register an MCP server whose tools your agents may call; its authorization header is sealed and never shown again',
    body: restMcpServerCreateBody,
    ok: { json: one },
    created: true,
    errors: { style, codes: ['BAD_USER_INPUT', 'CONFLICT', 'UNPROCESSABLE', 'UNAVAILABLE'] },
    handler: async (request, _reply, { services }) => ({
      server: toRestMcpServer(await services.mcpServers.create(request.viewer, body(request.body))),
    }),
  }),
  operation({
    operationId: 'listMcpServers',
    method: 'get',
    path: '/v2/mcp/servers',
    tag: TAG,
    summary: 'Your MCP servers, by name',
    ok: { json: z.object({ servers: z.array(restMcpServerSchema) }) },
    handler: async (request, _reply, { services }) => ({ servers: (await services.mcpServers.list(request.viewer)).map(toRestMcpServer) }),
  }),
  operation({
    operationId: 'getMcpServer',
    method: 'get',
    path: '/v2/mcp/servers/:serverId',
    tag: TAG,
    summary: 'One of your MCP servers',
    ok: { json: one },
    errors: { style, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      server: toRestMcpServer(await services.mcpServers.get(request.viewer, request.params.serverId)),
    }),
  }),
  operation({
    operationId: 'listMcpServerTools',
    method: 'get',
    path: '/v2/mcp/servers/:serverId/tools',
    tag: TAG,
    summary: "The server's tools with their JSON Schemas (tools/list, kept a while and refreshed when the server says they changed)",
    ok: { json: z.object({ tools: z.array(restMcpToolSchema) }) },
    errors: { style, codes: ['NOT_FOUND', 'UNAVAILABLE'] },
    handler: async (request, _reply, { services }) => ({
      tools: (await services.mcpServers.tools(request.viewer, request.params.serverId)).map(toRestMcpTool),
    }),
  }),
  operation({
    operationId: 'updateMcpServer',
    method: 'patch',
    path: '/v2/mcp/servers/:serverId',
    tag: TAG,
    summary: 'Change an MCP server (only the fields sent; only the headers named, null removing one)',
    body: restMcpServerPatchBody,
    ok: { json: one },
    errors: { style, codes: ['NOT_FOUND', 'BAD_USER_INPUT', 'CONFLICT', 'UNAVAILABLE'] },
    handler: async (request, _reply, { services }) => ({
      server: toRestMcpServer(await services.mcpServers.update(request.viewer, request.params.serverId, body(request.body))),
    }),
  }),
  operation({
    operationId: 'deleteMcpServer',
    method: 'delete',
    path: '/v2/mcp/servers/:serverId',
    tag: TAG,
    summary: 'Delete an MCP server and its sealed authorization header',
    ok: { json: z.object({ success: z.literal(true) }) },
    errors: { style, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      await services.mcpServers.remove(request.viewer, request.params.serverId);
      return { success: true as const };
    },
  }),
];
