import { z } from 'zod';
import { canReadAgent } from '../domain/agents/index.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import type { MediaLinks } from '../domain/core/media-links.ts';
import { creationBulkPatchSchema, creationPatchSchema } from '../domain/creations/index.ts';
import { searchInput, type Scored } from '../domain/search/index.ts';
import type { Prisma } from '../generated/prisma/client.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { type RestCreationRow, restCreationInclude, restCreationSchema, toRestCreation } from './creation-shapes.ts';
import { operation } from './operation.ts';

const errors: RestErrorStyle = { bodyKey: 'message' };
const creationQuery = { include: restCreationInclude };

const searchDocInclude = {
  user: { select: { id: true, username: true } },
  agent: { include: { user: { select: { username: true } } } },
} satisfies Prisma.CreationInclude;

type SearchRow = Scored<Prisma.CreationGetPayload<{ include: typeof searchDocInclude }>>;

/**
 * A search result as REST returns it. The agent is summarised, and reads as null when it is
 * someone else's private agent, as everywhere else in the API.
 */
export const restSearchDocSchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    url: z.string(),
    thumbnail: z.string().nullable(),
    name: z.string(),
    tool: z.string(),
    args: z.unknown(),
    mediaAttributes: z.unknown(),
    user: z.object({ _id: z.string(), id: z.string(), username: z.string() }),
    agent: z
      .object({ _id: z.string(), id: z.string(), key: z.string(), username: z.string(), name: z.string(), image: z.string().nullable() })
      .nullable(),
    likeCount: z.number().int(),
    createdAt: z.date(),
    score: z.number().meta({ description: 'Cosine similarity to the query' }),
  })
  .meta({ id: 'CreationSearchDoc' });

/** The page as the original's "paginate" plugin shaped it (src/domain/core/page.ts). */
export const restSearchPageSchema = z
  .object({
    docs: z.array(restSearchDocSchema),
    total: z.number().int(),
    limit: z.number().int(),
    page: z.number().int(),
    pages: z.number().int(),
    pagingCounter: z.number().int(),
    hasPrevPage: z.boolean(),
    hasNextPage: z.boolean(),
    prevPage: z.number().int().nullable(),
    nextPage: z.number().int().nullable(),
  })
  .meta({ id: 'CreationSearchPage' });

export const toRestSearchDoc = (viewer: Viewer, c: SearchRow, links: MediaLinks): z.input<typeof restSearchDocSchema> => ({
  _id: c.id,
  id: c.id,
  url: links.absolute(c.url),
  thumbnail: links.absolute(c.thumbnail),
  name: c.name,
  tool: c.tool,
  args: c.args,
  mediaAttributes: c.mediaAttributes,
  user: { _id: c.user.id, id: c.user.id, username: c.user.username },
  agent:
    c.agent && canReadAgent(viewer, c.agent)
      ? {
          _id: c.agent.id,
          id: c.agent.id,
          key: c.agent.user.username,
          username: c.agent.user.username,
          name: c.agent.name,
          image: c.agent.image,
        }
      : null,
  likeCount: c.likeCount,
  createdAt: c.createdAt,
  score: c.score,
});

export const creationOperations = [
  operation({
    operationId: 'searchCreations',
    method: 'get',
    path: '/v2/creations/search',
    tag: 'Creations',
    summary: 'Search creations by meaning (embeddings), a page at a time',
    query: searchInput,
    ok: { json: restSearchPageSchema },
    errors: { style: errors, codes: ['BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const page = await services.search.search(request.viewer, request.query, { include: searchDocInclude });
      return { ...page, docs: page.docs.map((doc) => toRestSearchDoc(request.viewer, doc, services.links)) };
    },
  }),
  operation({
    operationId: 'likeCreation',
    method: 'post',
    path: '/v2/creations/:creationId/like',
    tag: 'Creations',
    summary: 'Like a creation you can see',
    ok: { json: z.object({ message: z.string() }) },
    errors: { style: errors, codes: ['NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      await services.creations.like(request.viewer, request.params.creationId);
      return { message: 'Creation liked successfully' };
    },
  }),
  operation({
    operationId: 'unlikeCreation',
    method: 'delete',
    path: '/v2/creations/:creationId/like',
    tag: 'Creations',
    summary: 'Take back your like',
    ok: { json: z.object({ message: z.string() }) },
    errors: { style: errors, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      await services.creations.unlike(request.viewer, request.params.creationId);
      return { message: 'Creation unliked successfully' };
    },
  }),
  operation({
    operationId: 'getCreation',
    method: 'get',
    path: '/v2/creations/:creationId',
    tag: 'Creations',
    summary: 'A creation of yours, or a public one',
    ok: { json: z.object({ creation: restCreationSchema }) },
    errors: { style: errors, codes: ['NOT_FOUND'] },
    handler: async (request, _reply, { services }) => {
      const creation = await services.creations.get(request.viewer, request.params.creationId, creationQuery);
      return { creation: toRestCreation(request.viewer, creation as RestCreationRow, services.tools, services.links) };
    },
  }),
  operation({
    operationId: 'updateCreation',
    method: 'patch',
    path: '/v2/creations/:creationId',
    tag: 'Creations',
    summary: 'Rename a creation of yours, make it public or private, or delete it (it then leaves every collection)',
    body: creationPatchSchema,
    ok: { json: z.object({ creation: restCreationSchema }) },
    errors: { style: errors, codes: ['NOT_FOUND', 'FORBIDDEN', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const creation = await services.creations.update(request.viewer, request.params.creationId, request.body ?? {}, creationQuery);
      return { creation: toRestCreation(request.viewer, creation as RestCreationRow, services.tools, services.links) };
    },
  }),
  operation({
    operationId: 'updateCreations',
    method: 'patch',
    path: '/v2/creations/bulk',
    tag: 'Creations',
    summary: 'The same change to up to 100 creations of yours, all or none',
    body: creationBulkPatchSchema,
    ok: { json: z.object({ creations: z.array(restCreationSchema) }) },
    errors: { style: errors, codes: ['NOT_FOUND', 'FORBIDDEN', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      const creations = await services.creations.updateMany(request.viewer, request.body ?? {}, creationQuery);
      return { creations: creations.map((c) => toRestCreation(request.viewer, c as RestCreationRow, services.tools, services.links)) };
    },
  }),
];
