import { badInput } from '../../domain/core/errors.ts';
import type { McpServerView, McpTool } from '../../domain/mcp-servers/index.ts';
import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';
import { Creator } from './creator.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

const McpHeader = builder.objectRef<{ name: string; value: string }>('McpHeader').implement({
  description: 'A header sent with every request to an MCP server.',
  fields: (t) => ({ name: t.exposeString('name', { description: 'Lower-cased.' }), value: t.exposeString('value') }),
});

const McpToolRef = builder.objectRef<McpTool>('McpTool').implement({
  description: 'A tool an MCP server offers, as its tools/list gave it.',
  fields: (t) => ({
    name: t.exposeString('name'),
    title: t.exposeString('title', { nullable: true }),
    description: t.exposeString('description'),
    inputSchema: t.field({ type: 'JSON', description: "The JSON Schema of the tool's arguments.", resolve: (tool) => tool.inputSchema }),
  }),
});

export const McpServer = builder.objectRef<McpServerView>('McpServer').implement({
  description:
    'An MCP server you registered: its tools may be enabled on your agents. Its authorization header is sealed and never shown after it is given.',
  interfaces: nodeInterfaces,
  fields: (t) => ({
    id: t.globalID({ resolve: (s) => ({ type: 'McpServer', id: s.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    name: t.exposeString('name', { description: 'The model sees its tools as `<name>__<tool>`.' }),
    url: t.exposeString('url'),
    headers: t.field({
      type: [McpHeader],
      description: 'Sent with every request; never the authorization header.',
      resolve: (s) => Object.entries(s.headers).map(([name, value]) => ({ name, value })),
    }),
    hasAuthorization: t.exposeBoolean('hasAuthorization', { description: 'Whether an authorization header is kept (sealed).' }),
    pricePerCall: t.exposeInt('pricePerCall', { description: 'Manna a call of one of its tools costs.' }),
    tools: t.field({
      type: [McpToolRef],
      description:
        'Its tools with their JSON Schemas (kept a while, refreshed when the server says they changed); an error, with the reason, when it cannot be used.',
      resolve: (s, _args, ctx) => ctx.services.mcpServers.tools(viewerOf(ctx), s.id),
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

builder.objectField(Creator, 'mcpServers', (t) =>
  t.field({
    type: [McpServer],
    description: 'Your MCP servers, by name: on your own profile; empty elsewhere.',
    resolve: (user, _args, ctx) => (user.id === viewerOf(ctx).id ? ctx.services.mcpServers.list(viewerOf(ctx)) : []),
  }),
);

const McpHeaderInput = builder.inputType('McpHeaderInput', {
  fields: (t) => ({
    name: t.string({ required: true }),
    value: t.string({ description: 'null (in an update) removes the header; an Authorization value is sealed.' }),
  }),
});

const CreateMcpServerInput = builder.inputType('CreateMcpServerInput', {
  fields: (t) => ({
    name: t.string({ required: true, description: '1 to 24 lower-case letters, digits, - or _.' }),
    url: t.string({ required: true, description: 'The Streamable HTTP endpoint: https, on a public address.' }),
    headers: t.field({ type: [McpHeaderInput] }),
    pricePerCall: t.int(),
  }),
});
const UpdateMcpServerInput = builder.inputType('UpdateMcpServerInput', {
  fields: (t) => ({
    name: t.string(),
    url: t.string(),
    headers: t.field({ type: [McpHeaderInput], description: 'Only the headers named change.' }),
    pricePerCall: t.int(),
  }),
});

type Given = {
  name?: string | null;
  url?: string | null;
  pricePerCall?: number | null;
  headers?: { name: string; value?: string | null }[] | null;
};

/** The domain's input: the headers a map, unset fields left out. */
function domainInput(input: Given) {
  const headers = input.headers?.map((h) => [h.name, h.value ?? null] as const);
  // A map holds a name once: the list may not, and must not lose one unseen.
  if (headers && new Set(headers.map(([n]) => n.toLowerCase())).size !== headers.length)
    throw badInput('names a header twice', ['headers']);
  return Object.fromEntries(
    Object.entries({
      name: input.name,
      url: input.url,
      pricePerCall: input.pricePerCall,
      headers: headers && Object.fromEntries(headers),
    }).filter(([, v]) => v != null),
  );
}

builder.mutationFields((t) => ({
  createMcpServer: t.field({
    type: McpServer,
    description: 'Registers an MCP server; its authorization header is sealed and never shown again.',
    args: { input: t.arg({ type: CreateMcpServerInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.mcpServers.create(viewerOf(ctx), domainInput(input) as never),
  }),
  updateMcpServer: t.field({
    type: McpServer,
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateMcpServerInput, required: true }) },
    resolve: (_root, { id, input }, ctx) => ctx.services.mcpServers.update(viewerOf(ctx), String(id), domainInput(input) as never),
  }),
  deleteMcpServer: t.globalID({
    description: 'Deletes an MCP server and its sealed authorization header; the id it had.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => ({ type: 'McpServer', id: await ctx.services.mcpServers.remove(viewerOf(ctx), String(id)) }),
  }),
}));
