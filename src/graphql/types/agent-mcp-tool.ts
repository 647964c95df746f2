import type { AgentMcpToolView } from '../../domain/agents/index.ts';
import { functionName } from '../../domain/mcp-servers/index.ts';
import { builder } from '../builder.ts';
import { maybeViewer, viewerOf } from '../context.ts';
import { McpServer } from './mcp-server.ts';

/** A row as the agent's field reads it: with its server's name, which its function name starts with. */
type AgentMcpToolRow = AgentMcpToolView & { server: { name: string } };

const AgentMcpTool = builder.objectRef<AgentMcpToolRow>('AgentMcpTool').implement({
  description: "A tool of one of your MCP servers enabled on your agent: the model sees it as `<server's name>__<tool>`.",
  fields: (t) => ({
    server: t.field({ type: McpServer, resolve: (row, _args, ctx) => ctx.services.mcpServers.get(viewerOf(ctx), row.serverId) }),
    tool: t.exposeString('tool', { description: 'The name its server lists it under.' }),
    functionName: t.string({
      description: "The name the model calls it by, and the key of its rule in the agent's `toolApproval`.",
      resolve: (row) => functionName(row.server.name, row.tool),
    }),
  }),
});

export const AgentMcpToolInput = builder.inputType('AgentMcpToolInput', {
  fields: (t) => ({
    serverId: t.id({ required: true, description: 'One of your MCP servers.' }),
    tool: t.string({ required: true, description: 'The name its server lists the tool under.' }),
  }),
});

builder.prismaObjectField('Agent', 'mcpTools', (t) =>
  t.field({
    type: [AgentMcpTool],
    nullable: true,
    description: 'Tools of your MCP servers enabled on the agent; null unless you own it.',
    select: {
      mcpTools: { orderBy: [{ serverId: 'asc' }, { tool: 'asc' }], include: { server: { select: { name: true } } } },
    },
    resolve: (agent, _args, ctx) => (maybeViewer(ctx)?.id === agent.ownerId ? agent.mcpTools : null),
  }),
);
