import SchemaBuilder from '@pothos/core';
import PrismaPlugin from '@pothos/plugin-prisma';
import RelayPlugin from '@pothos/plugin-relay';
import type PrismaTypes from '../generated/pothos-prisma-types.ts';
import { connectionGuardPlugin } from './connection-guard.ts';
import { idArgsPlugin } from './id-args.ts';
import { getDatamodel } from '../generated/pothos-prisma-types.ts';
import type { GraphQLContext } from './context.ts';

export const builder = new SchemaBuilder<{
  Context: GraphQLContext;
  PrismaTypes: PrismaTypes;
  Scalars: {
    DateTime: { Input: Date; Output: Date };
    JSON: { Input: unknown; Output: unknown };
    Seq: { Input: number; Output: number };
  };
  DefaultFieldNullability: false;
}>({
  plugins: [PrismaPlugin, RelayPlugin, connectionGuardPlugin, idArgsPlugin],
  defaultFieldNullability: false,
  prisma: {
    client: (ctx) => ctx.services.db,
    dmmf: getDatamodel(),
    filterConnectionTotalCount: true,
    defaultConnectionSize: 20,
    maxConnectionSize: 100,
    onUnusedQuery: null,
  },
  // Query.node and Query.nodes are our own (types/node.ts), to load through the services' rules.
  relay: { clientMutationId: 'omit', cursorType: 'String', nodeQueryOptions: false, nodesQueryOptions: false },
});

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});
