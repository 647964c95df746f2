import { queryFromInfo } from '@pothos/plugin-prisma';
import type { GraphQLResolveInfo } from 'graphql';
import type { CreationQuery } from '../../domain/creations/index.ts';
import type { Page } from '../../domain/core/page.ts';
import type { Scored } from '../../domain/search/index.ts';
import type { Creation as CreationRow } from '../../generated/prisma/client.ts';
import { builder } from '../builder.ts';
import { toConnection } from '../connection.ts';
import { viewerOf, type GraphQLContext } from '../context.ts';
import { Creation } from './creation.ts';
import { CreationSearchOrderEnum, SortDirectionEnum } from './enums.ts';

const CreationSearchPage = builder.objectRef<Page<Scored<CreationRow>>>('CreationSearchPage').implement({
  description: 'One page of search results, numbered as the REST API numbers them (prevPage and nextPage are null at the ends).',
  fields: (t) => ({
    docs: t.field({ type: [Creation], resolve: (p) => p.docs }),
    total: t.exposeInt('total', { description: 'All matches within the relevance cut, on every page.' }),
    limit: t.exposeInt('limit'),
    page: t.exposeInt('page'),
    pages: t.exposeInt('pages'),
    pagingCounter: t.exposeInt('pagingCounter', { description: 'The 1-based number of the first result of this page.' }),
    hasPrevPage: t.exposeBoolean('hasPrevPage'),
    hasNextPage: t.exposeBoolean('hasNextPage'),
    prevPage: t.exposeInt('prevPage', { nullable: true }),
    nextPage: t.exposeInt('nextPage', { nullable: true }),
  }),
});

const CreationSearchFilter = builder.inputType('CreationSearchFilter', {
  fields: (t) => ({
    agentId: t.id({ description: 'Only creations made by this agent.' }),
    userId: t.id({ description: 'Only creations of this creator.' }),
    tool: t.string({ description: 'Only creations made with this tool (its key).' }),
  }),
});

interface SearchArgs {
  query: string;
  filter?: { agentId?: string | number | null; userId?: string | number | null; tool?: string | null } | null;
  orderBy?: string | null;
  direction?: string | null;
}

/** GraphQL's nulls mean "not given"; every check on the values happens in the domain's schema. */
const searchInput = ({ query, filter, orderBy, direction }: SearchArgs) => ({
  query,
  agentId: filter?.agentId == null ? undefined : String(filter.agentId),
  userId: filter?.userId == null ? undefined : String(filter.userId),
  tool: filter?.tool ?? undefined,
  orderBy: orderBy ?? undefined,
  direction: direction ?? undefined,
});

/** Loads the creations with the relations the operation selects below `path`, in the same few statements. */
const creationQuery = (ctx: GraphQLContext, info: GraphQLResolveInfo, path: string[]) =>
  queryFromInfo({ context: ctx, info, typeName: 'Creation', path }) as CreationQuery;

builder.queryFields((t) => ({
  searchCreations: t.field({
    type: CreationSearchPage,
    description:
      'Semantic search over the creations you can see (public ones and your own), ranked by similarity to `query`. ' +
      'Only matches within the relevance cut count; see docs/search.md.',
    args: {
      query: t.arg.string({ required: true }),
      filter: t.arg({ type: CreationSearchFilter }),
      page: t.arg.int({ description: '1-based; default 1.' }),
      limit: t.arg.int({ description: '1 to 100; default 20.' }),
      orderBy: t.arg({ type: CreationSearchOrderEnum, description: 'Default SCORE.' }),
      direction: t.arg({ type: SortDirectionEnum, description: 'Default DESC.' }),
    },
    resolve: (_root, args, ctx, info) =>
      ctx.services.search.search(
        viewerOf(ctx),
        { ...searchInput(args), page: args.page ?? undefined, limit: args.limit ?? undefined },
        creationQuery(ctx, info, ['docs']),
      ),
  }),
  searchCreationsConnection: t.connection(
    {
      type: Creation,
      description:
        'The same results as `searchCreations`, as a forward cursor connection for infinite scroll (`first` up to 100, `after`).',
      args: {
        query: t.arg.string({ required: true }),
        filter: t.arg({ type: CreationSearchFilter }),
        orderBy: t.arg({ type: CreationSearchOrderEnum }),
        direction: t.arg({ type: SortDirectionEnum }),
      },
      resolve: async (_root, args, ctx, info) => {
        const page = await ctx.services.search.connection(
          viewerOf(ctx),
          searchInput(args),
          { first: args.first, after: args.after, last: args.last, before: args.before },
          creationQuery(ctx, info, ['edges', 'node']),
        );
        return toConnection(page.nodes, page.cursor, page, { totalCount: page.totalCount });
      },
    },
    {
      name: 'CreationSearchConnection',
      fields: (c) => ({
        totalCount: c.int({
          description: 'All matches within the relevance cut.',
          resolve: (conn) => (conn as { totalCount: number }).totalCount,
        }),
      }),
    },
    { name: 'CreationSearchEdge' },
  ),
}));
