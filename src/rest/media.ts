import type { FastifyInstance } from 'fastify';
import { MEDIA_PATH } from '../domain/media/store.ts';

/** Media files are named by id and extension, in one folder: anything else names no file of ours. */
const MEDIA_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]*\.[a-z0-9]{2,5}$/;

/**
 * Files the service made (tool outputs), to anyone with the link, like a CDN would: the right
 * content type, byte ranges, and cached for good (a file never changes). A name that could
 * reach outside the media folder is refused.
 */
export function mediaRoutes(app: FastifyInstance, mediaDir: string) {
  app.get<{ Params: { file: string } }>(`${MEDIA_PATH}/:file`, { config: { public: true } }, (request, reply) => {
    const { file } = request.params;
    if (!MEDIA_NAME.test(file)) return reply.code(403).send({ error: 'Forbidden', message: 'Not a media file name' });
    return reply.sendFile(file, mediaDir, { immutable: true, maxAge: '365d' });
  });
}
