import { z } from 'zod';
import {
  type CollectionRead,
  collectionChangeSchema,
  collectionCreateSchema,
  collectionPatchSchema,
  lightPageSchema,
} from '../domain/collections/index.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import type { Services } from '../domain/services.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { type RestCreationRow, restCreationInclude, restCreationSchema, toRestCreation } from './creation-shapes.ts';
import { type CreatorRow, restCreatorRefSchema, toRestCreatorRef } from './creators.ts';
import { operation } from './operation.ts';
import { listNames, listQuery, nextCursor } from './sessions.ts';

/**
 * Collections answer `{error, message}` (the SDK reads `error`); someone else's private
 * collection is 404 like an unknown one, someone else's public one 403 for a change.
 */
const errors: RestErrorStyle = { bodyKey: 'both', fieldName: listNames.toRest };

/** The creations a collection document carries; the rest are paged by `GET /v2/collections/{id}/creations`. */
const FIRST_CREATIONS = 20;

const creationQuery = { include: restCreationInclude };
const collectionQuery = { include: { user: true } } as const;
type RestCollectionRow = CollectionRead<object> & { user: CreatorRow };

export const restCollectionSchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    user: restCreatorRefSchema,
    name: z.string(),
    description: z.string(),
    public: z.boolean(),
    deleted: z.literal(false).meta({ description: 'Always false: a deleted collection is gone' }),
    contributors: z.array(restCreatorRefSchema).meta({ description: 'Always empty: only the owner adds to a collection' }),
    creations: z.array(restCreationSchema).meta({
      description: `The first ${FIRST_CREATIONS} creations you may see in it, in the order they were added (GET .../creations pages on)`,
    }),
    creationCount: z.number().int().meta({ description: 'How many creations it shows you' }),
    coverCreation: restCreationSchema.optional().meta({ description: 'The first creation it shows you; absent when it shows none' }),
    nextCursor: nextCursor.meta({ description: 'Pass as `cursor` to GET .../creations for the creations after `creations`' }),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'Collection' });

const restLightCollectionSchema = z
  .object({
    _id: z.string(),
    id: z.string(),
    name: z.string(),
    public: z.boolean(),
    creations: z.array(z.string()).meta({ description: 'The ids of the creations it holds, in the order they were added' }),
    contributors: z.array(z.string()).meta({ description: 'Always empty' }),
  })
  .meta({ id: 'LightCollection' });

/** The collection as its reader sees it: count, cover and first creations by what it shows them. */
async function toRestCollection(services: Services, viewer: Viewer, c: RestCollectionRow): Promise<z.input<typeof restCollectionSchema>> {
  const [page, summaries] = await Promise.all([
    services.collections.creations(viewer, c, { first: FIRST_CREATIONS }, creationQuery),
    services.collections.summaries(viewer, [c]),
  ]);
  const creations = page.creations.map((x) => toRestCreation(viewer, x as RestCreationRow, services.tools, services.links));
  return {
    _id: c.id,
    id: c.id,
    user: toRestCreatorRef(c.user),
    name: c.name,
    description: c.description,
    public: c.public,
    deleted: false,
    contributors: [],
    creations,
    creationCount: summaries.get(c.id)?.count ?? 0,
    ...(creations[0] ? { coverCreation: creations[0] } : {}),
    nextCursor: page.nextCursor,
    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
  };
}

const read = async (services: Services, viewer: Viewer, id: string) =>
  toRestCollection(services, viewer, (await services.collections.get(viewer, id, collectionQuery)) as RestCollectionRow);

/** After a change: how many creations the collection now shows the caller. */
const changedSchema = {
  collectionId: z.string(),
  creationCount: z.number().int().meta({ description: 'How many creations it now shows you' }),
};
async function afterChange(services: Services, viewer: Viewer, id: string, count: number) {
  const summaries = await services.collections.summaries(viewer, [await services.collections.get(viewer, id)]);
  return { collectionId: id, creationCount: summaries.get(id)?.count ?? 0, count };
}
const changeErrors = { style: errors, codes: ['NOT_FOUND', 'FORBIDDEN', 'BAD_USER_INPUT'] } as const;

export const collectionOperations = [
  operation({
    operationId: 'createCollection',
    method: 'post',
    path: '/v2/collections',
    tag: 'Collections',
    summary: 'Create a collection (public unless told), with creations you may see',
    body: collectionCreateSchema,
    ok: { json: z.object({ collectionId: z.string(), collection: restCollectionSchema }) },
    created: true,
    errors: { style: errors, codes: ['BAD_USER_INPUT', 'UNPROCESSABLE'] },
    handler: async (request, _reply, { services }) => {
      const created = (await services.collections.create(request.viewer, request.body ?? {}, collectionQuery)) as RestCollectionRow;
      return { collectionId: created.id, collection: await toRestCollection(services, request.viewer, created) };
    },
  }),
  operation({
    operationId: 'listMyCollections',
    method: 'get',
    path: '/v2/collections/light',
    tag: 'Collections',
    summary: 'Your collections, newest first, each with the ids of the creations it holds',
    query: listNames.schema(lightPageSchema),
    ok: { json: z.object({ collections: z.array(restLightCollectionSchema), nextCursor }) },
    errors: { style: errors, codes: ['BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const { limit, cursor } = request.query;
      const page = await services.collections.light(request.viewer, { first: limit, after: cursor });
      return {
        collections: page.collections.map((c) => ({
          _id: c.id,
          id: c.id,
          name: c.name,
          public: c.public,
          creations: c.creationIds,
          contributors: [],
        })),
        nextCursor: page.nextCursor,
      };
    },
  }),
  operation({
    operationId: 'getCollection',
    method: 'get',
    path: '/v2/collections/:collectionId',
    tag: 'Collections',
    summary: 'A collection of yours, or a public one, with its first creations',
    ok: { json: z.object({ collection: restCollectionSchema }) },
    errors: { style: errors, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      collection: await read(services, request.viewer, request.params.collectionId),
    }),
  }),
  operation({
    operationId: 'updateCollection',
    method: 'patch',
    path: '/v2/collections/:collectionId',
    tag: 'Collections',
    summary: 'Rename, describe, publish or unpublish a collection of yours (only the fields sent change)',
    body: collectionPatchSchema,
    ok: { json: z.object({ collectionId: z.string(), collection: restCollectionSchema }) },
    errors: { style: errors, codes: ['NOT_FOUND', 'FORBIDDEN', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const updated = await services.collections.update(request.viewer, request.params.collectionId, request.body ?? {}, collectionQuery);
      return { collectionId: updated.id, collection: await toRestCollection(services, request.viewer, updated as RestCollectionRow) };
    },
  }),
  operation({
    operationId: 'deleteCollection',
    method: 'delete',
    path: '/v2/collections/:collectionId',
    tag: 'Collections',
    summary: 'Delete a collection of yours (its creations stay)',
    ok: { json: z.object({ success: z.boolean() }) },
    errors: { style: errors, codes: ['NOT_FOUND', 'FORBIDDEN'] },
    handler: async (request, _reply, { services }) => {
      await services.collections.delete(request.viewer, request.params.collectionId);
      return { success: true };
    },
  }),
  operation({
    operationId: 'listCollectionCreations',
    method: 'get',
    path: '/v2/collections/:collectionId/creations',
    tag: 'Collections',
    summary: 'A page of the creations a collection shows you, in the order they were added',
    query: listQuery,
    ok: {
      json: z.object({
        docs: z.array(restCreationSchema),
        total: z.number().int().meta({ description: 'How many creations it shows you in all' }),
        limit: z.number().int(),
        hasNextPage: z.boolean(),
        nextCursor,
      }),
    },
    errors: { style: errors, codes: ['NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const { limit, cursor } = request.query;
      const collection = await services.collections.get(request.viewer, request.params.collectionId);
      const [page, summaries] = await Promise.all([
        services.collections.creations(request.viewer, collection, { first: limit, after: cursor }, creationQuery),
        services.collections.summaries(request.viewer, [collection]),
      ]);
      return {
        docs: page.creations.map((c) => toRestCreation(request.viewer, c as RestCreationRow, services.tools, services.links)),
        total: summaries.get(collection.id)?.count ?? 0,
        limit: limit === undefined ? 20 : Number(limit),
        hasNextPage: page.nextCursor !== null,
        nextCursor: page.nextCursor,
      };
    },
  }),
  operation({
    operationId: 'addCollectionCreations',
    method: 'patch',
    path: '/v2/collections/:collectionId/creations/add',
    tag: 'Collections',
    summary: 'Add creations you may see to a collection of yours (one already in stays once)',
    body: collectionChangeSchema,
    ok: { json: z.object({ ...changedSchema, added: z.number().int() }) },
    errors: { ...changeErrors, codes: [...changeErrors.codes] },
    handler: async (request, _reply, { services }) => {
      const id = request.params.collectionId;
      const { count, ...after } = await afterChange(
        services,
        request.viewer,
        id,
        await services.collections.add(request.viewer, id, request.body ?? {}),
      );
      return { ...after, added: count };
    },
  }),
  operation({
    operationId: 'removeCollectionCreations',
    method: 'patch',
    path: '/v2/collections/:collectionId/creations/remove',
    tag: 'Collections',
    summary: 'Take creations out of a collection of yours (naming one that is not in changes nothing)',
    body: collectionChangeSchema,
    ok: { json: z.object({ ...changedSchema, removed: z.number().int() }) },
    errors: { ...changeErrors, codes: [...changeErrors.codes] },
    handler: async (request, _reply, { services }) => {
      const id = request.params.collectionId;
      const { count, ...after } = await afterChange(
        services,
        request.viewer,
        id,
        await services.collections.remove(request.viewer, id, request.body ?? {}),
      );
      return { ...after, removed: count };
    },
  }),
];
