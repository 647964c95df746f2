import { prismaConnectionHelpers } from '@pothos/plugin-prisma';
import { readableCollections, shownItems } from '../../domain/collections/index.ts';
import { newestFirst } from '../../domain/core/ordering.ts';
import { builder } from '../builder.ts';
import { checkHelperConnectionArgs } from '../connection-guard.ts';
import { viewerOf } from '../context.ts';
import { Creation } from './creation.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

/**
 * Collections over GraphQL. What a reader sees inside a collection (its creations, their count,
 * its cover) is the store's `shownItems` filter, planned into the statement that reads the
 * collection, so a page of collections with their covers and counts is a fixed number of statements.
 */
const oldestAddedFirst = { id: 'asc' as const };

/** A collection's creations, by the item that put each there (so pages go on in the order they were added). */
const shownCreations = prismaConnectionHelpers(builder, 'CollectionCreation', {
  cursor: 'id',
  query: (_args, ctx) => ({ where: shownItems(viewerOf(ctx)), orderBy: oldestAddedFirst }),
  // The node's id keeps the selection non-empty when a client asks for cursors only.
  select: (nodeSelection) => ({ creation: nodeSelection({ select: { id: true } }) }),
  resolveNode: (item) => item.creation,
});

export const Collection = builder.prismaObject('Collection', {
  interfaces: nodeInterfaces,
  description:
    "A named set of creations. You see a creation in it when you may and its owner may: a private creation shows only in its author's own collections, to its author.",
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Collection', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    name: t.exposeString('name'),
    description: t.exposeString('description'),
    public: t.exposeBoolean('public'),
    owner: t.relation('user'),
    creationCount: t.relationCount('items', {
      description: 'How many creations it shows you.',
      where: (_args, ctx) => shownItems(viewerOf(ctx)),
    }),
    cover: t.field({
      type: Creation,
      nullable: true,
      description: 'The first creation it shows you (the one added earliest), or null.',
      select: (_args, ctx, nested) => ({
        items: { where: shownItems(viewerOf(ctx)), orderBy: oldestAddedFirst, take: 1, select: { creation: nested(true) } },
      }),
      resolve: (collection) => collection.items[0]?.creation ?? null,
    }),
    creations: t.connection({
      type: Creation,
      description: 'The creations it shows you, in the order they were added.',
      select: (args, ctx, nested) => {
        checkHelperConnectionArgs(args, 'CollectionCreation', 'id');
        return { items: shownCreations.getQuery(args, ctx, nested) };
      },
      // The rows are read with the node fields the query selects; the helper's type knows only the id.
      resolve: (collection, args, ctx) => shownCreations.resolve(collection.items, args, ctx) as never,
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

/** The collections a creation is in that you may read and that show it to you. */
const holdingCollections = prismaConnectionHelpers(builder, 'CollectionCreation', {
  cursor: 'id',
  query: (_args, ctx) => {
    const viewer = viewerOf(ctx);
    return { where: { AND: [shownItems(viewer), { collection: readableCollections(viewer) }] }, orderBy: { id: 'desc' as const } };
  },
  select: (nodeSelection) => ({ collection: nodeSelection({ select: { id: true } }) }),
  resolveNode: (item) => item.collection,
});

builder.prismaObjectField('Creation', 'collections', (t) =>
  t.connection({
    type: Collection,
    description: 'Collections you may read that hold this creation and show it to you, latest addition first.',
    select: (args, ctx, nested) => {
      checkHelperConnectionArgs(args, 'CollectionCreation', 'id');
      return { collectionItems: holdingCollections.getQuery(args, ctx, nested) };
    },
    resolve: (creation, args, ctx) => holdingCollections.resolve(creation.collectionItems, args, ctx) as never,
  }),
);

builder.prismaObjectField('User', 'collections', (t) =>
  t.relatedConnection('collections', {
    cursor: 'id',
    description: "This creator's collections: all of them on your own profile, public ones elsewhere; newest first.",
    query: (_args, ctx) => ({ where: readableCollections(viewerOf(ctx)), orderBy: newestFirst }),
  }),
);

const CreateCollectionInput = builder.inputType('CreateCollectionInput', {
  fields: (t) => ({
    name: t.string({ required: true }),
    description: t.string(),
    public: t.boolean({ description: 'true unless told.' }),
    creationIds: t.idList({ description: 'Creations you may see, in the order to show them (at most 100).' }),
  }),
});
const UpdateCollectionInput = builder.inputType('UpdateCollectionInput', {
  fields: (t) => ({ name: t.string(), description: t.string(), public: t.boolean() }),
});

/** GraphQL sends null for an omitted field; the domain's schema reads absent. */
const withoutNulls = (input: Record<string, unknown>) => Object.fromEntries(Object.entries(input).filter(([, v]) => v != null));

builder.queryField('collection', (t) =>
  t.prismaField({
    type: 'Collection',
    description: 'A collection of yours, or a public one.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (query, _root, { id }, ctx) => ctx.services.collections.get(viewerOf(ctx), String(id), query),
  }),
);

builder.mutationFields((t) => ({
  createCollection: t.prismaField({
    type: 'Collection',
    args: { input: t.arg({ type: CreateCollectionInput, required: true }) },
    resolve: (query, _root, { input }, ctx) => ctx.services.collections.create(viewerOf(ctx), withoutNulls(input), query),
  }),
  updateCollection: t.prismaField({
    type: 'Collection',
    description: 'Changes only the fields given; owners only.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateCollectionInput, required: true }) },
    resolve: (query, _root, { id, input }, ctx) => ctx.services.collections.update(viewerOf(ctx), String(id), withoutNulls(input), query),
  }),
  deleteCollection: t.boolean({
    description: 'Deletes a collection of yours; its creations stay.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => {
      await ctx.services.collections.delete(viewerOf(ctx), String(id));
      return true;
    },
  }),
  addCreationsToCollection: t.prismaField({
    type: 'Collection',
    description: 'Adds creations you may see after the others; one already in stays once.',
    args: { id: t.arg.id({ required: true }), creationIds: t.arg.idList({ required: true }) },
    resolve: async (query, _root, { id, creationIds }, ctx) => {
      const viewer = viewerOf(ctx);
      await ctx.services.collections.add(viewer, String(id), { creationIds: creationIds.map(String) });
      return ctx.services.collections.get(viewer, String(id), query);
    },
  }),
  removeCreationsFromCollection: t.prismaField({
    type: 'Collection',
    description: 'Takes creations out; naming one that is not in changes nothing.',
    args: { id: t.arg.id({ required: true }), creationIds: t.arg.idList({ required: true }) },
    resolve: async (query, _root, { id, creationIds }, ctx) => {
      const viewer = viewerOf(ctx);
      await ctx.services.collections.remove(viewer, String(id), { creationIds: creationIds.map(String) });
      return ctx.services.collections.get(viewer, String(id), query);
    },
  }),
}));
