import { brandWithType } from '@pothos/core';
import { queryFromInfo } from '@pothos/plugin-prisma';
import type { GraphQLResolveInfo } from 'graphql';
import { notFound } from '../../domain/core/errors.ts';
import { builder } from '../builder.ts';
import { viewerOf, type GraphQLContext } from '../context.ts';
import { decodeGlobal } from '../global-ids.ts';
import { keepGlobalIds } from '../id-args.ts';

/**
 * Relay's Global Object Identification. Each type a client can fetch by itself implements
 * `Node`: its `id` is `base64("Type:rawId")` and `rawId` is the database id REST shows.
 * `node(id:)` loads through the same service call as the type's own query, so it answers or
 * refuses exactly as that query does (a stranger's private agent is an error and null, never
 * its fields).
 */
export const NodeInterface = builder.nodeInterfaceRef();
export const nodeInterfaces = [NodeInterface];

type Loader = (ctx: GraphQLContext, rawId: string, info: GraphQLResolveInfo) => Promise<object>;

/** The Prisma include a node's selection needs, as its own query would plan it. */
const planFor = (ctx: GraphQLContext, info: GraphQLResolveInfo, typeName: string) =>
  queryFromInfo({ context: ctx, info, typeName }) as { include?: never };

const loaders: Record<string, Loader> = {
  Agent: (ctx, id, info) => ctx.services.agents.get(viewerOf(ctx), id, planFor(ctx, info, 'Agent')),
  Concept: (ctx, id, info) => ctx.services.concepts.get(viewerOf(ctx), id, planFor(ctx, info, 'Concept')),
  Model: (ctx, id, info) => ctx.services.models.get(viewerOf(ctx), id, planFor(ctx, info, 'Model')),
  Creation: (ctx, id, info) => ctx.services.creations.get(viewerOf(ctx), id, planFor(ctx, info, 'Creation')),
  Collection: (ctx, id, info) => ctx.services.collections.get(viewerOf(ctx), id, planFor(ctx, info, 'Collection')),
  Creator: (ctx, id, info) => ctx.services.creators.get(viewerOf(ctx), id, planFor(ctx, info, 'Creator')),
  Session: (ctx, id, info) => ctx.services.sessions.get(viewerOf(ctx), id, planFor(ctx, info, 'Session')),
  Deployment: (ctx, id, info) => ctx.services.deployments.get(viewerOf(ctx), id, planFor(ctx, info, 'Deployment')),
  Trigger: (ctx, id, info) => ctx.services.triggers.get(viewerOf(ctx), id, planFor(ctx, info, 'Trigger')),
  Task: (ctx, id, info) => ctx.services.tasks.get(viewerOf(ctx), id, planFor(ctx, info, 'Task')),
  Webhook: (ctx, id) => ctx.services.webhooks.get(viewerOf(ctx), id),
  McpServer: (ctx, id) => ctx.services.mcpServers.get(viewerOf(ctx), id),
  Message: (ctx, id) => ctx.services.sessions.message(viewerOf(ctx), id),
  // A share is public by its id, as `share(shareId:)` is.
  Share: (ctx, id) => ctx.services.shares.read(id),
  Tool: async (ctx, key) => {
    viewerOf(ctx);
    const tool = ctx.services.tools.isAvailable(key) ? ctx.services.tools.get(key) : undefined;
    if (!tool) throw notFound('Tool not found');
    return { ...tool };
  },
};

const NODE_NOT_FOUND = 'No object has this id';

async function loadNode(ctx: GraphQLContext, id: string, info: GraphQLResolveInfo) {
  const global = decodeGlobal(id);
  const load = global && loaders[global.typename];
  if (!global || !load) throw notFound(NODE_NOT_FOUND);
  const node = await load(ctx, global.id, info);
  brandWithType(node, global.typename as never);
  return node;
}

builder.queryFields((t) => ({
  node: t.field({
    type: NodeInterface,
    nullable: true,
    description: 'Any object by its global id, under the same rules as its own query (null and an error when you may not see it).',
    args: { id: t.arg.id({ required: true }) },
    extensions: keepGlobalIds,
    resolve: (_root, { id }, ctx, info) => loadNode(ctx, String(id), info),
  }),
  nodes: t.field({
    type: [NodeInterface],
    nullable: { list: false, items: true },
    description: 'Several objects by global id, in order; each one you may not see is null with its own error.',
    args: { ids: t.arg.idList({ required: true }) },
    extensions: keepGlobalIds,
    resolve: (_root, { ids }, ctx, info) => ids.map((id) => loadNode(ctx, String(id), info)) as unknown as Promise<object>[],
  }),
}));

/** What every node type says about its `rawId` field. */
export const RAW_ID = 'The database id, as REST shows it; every id argument accepts it as well as the global `id`.';
