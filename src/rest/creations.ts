import type { FastifyInstance } from 'fastify';
import { canReadAgent } from '../domain/agents/service.ts';
import type { Scored } from '../domain/search/service.ts';
import type { Services } from '../domain/services.ts';
import type { Viewer } from '../domain/viewer.ts';
import type { Prisma } from '../generated/prisma/client.ts';
import type { RestErrorStyle } from './errors.ts';

const errors: RestErrorStyle = { bodyKey: 'message' };

const searchDocInclude = {
  user: { select: { id: true, username: true } },
  agent: { include: { user: { select: { username: true } } } },
} satisfies Prisma.CreationInclude;

type SearchRow = Scored<Prisma.CreationGetPayload<{ include: typeof searchDocInclude }>>;

/**
 * A search result as REST returns it. The agent is summarised, and reads as null when it is
 * someone else's private agent, as everywhere else in the API.
 */
export const toRestSearchDoc = (viewer: Viewer, c: SearchRow) => ({
  id: c.id,
  url: c.url,
  thumbnail: c.thumbnail,
  name: c.name,
  tool: c.tool,
  args: c.args,
  mediaAttributes: c.mediaAttributes,
  user: { id: c.user.id, username: c.user.username },
  agent: c.agent && canReadAgent(viewer, c.agent) ? { id: c.agent.id, key: c.agent.user.username, name: c.agent.name, image: c.agent.image } : null,
  likeCount: c.likeCount,
  createdAt: c.createdAt,
  score: c.score,
});

export function creationRoutes(app: FastifyInstance, services: Services) {
  app.get('/v2/creations/search', { config: { errors } }, async (request) => {
    const page = await services.search.search<SearchRow>(request.viewer, request.query, { include: searchDocInclude });
    return { ...page, docs: page.docs.map((doc) => toRestSearchDoc(request.viewer, doc)) };
  });

  app.post<{ Params: { creationId: string } }>('/v2/creations/:creationId/like', { config: { errors } }, async (request) => {
    await services.creations.like(request.viewer, request.params.creationId);
    return { message: 'Creation liked successfully' };
  });

  app.delete<{ Params: { creationId: string } }>('/v2/creations/:creationId/like', { config: { errors } }, async (request) => {
    await services.creations.unlike(request.viewer, request.params.creationId);
    return { message: 'Creation unliked successfully' };
  });
}
