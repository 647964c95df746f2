import type { FastifyInstance } from 'fastify';
import { MEDIA_FILE_NAME, MEDIA_PATH } from '../domain/core/media-links.ts';

/**
 * Files the service made (tool outputs), to anyone with the link, like a CDN would: the right
 * content type, byte ranges, and cached for good (a file never changes). A name that could
 * reach outside the media folder is refused.
 */
export function mediaRoutes(app: FastifyInstance, mediaDir: string) {
  app.get<{ Params: { file: string } }>(`${MEDIA_PATH}/:file`, { config: { public: true } }, (request, reply) => {
    const { file } = request.params;
    // Media files are named by id and extension, in one folder: anything else names no file of ours.
    if (!MEDIA_FILE_NAME.test(file)) return reply.code(403).send({ error: 'Forbidden', message: 'Not a media file name' });
    return reply.sendFile(file, mediaDir, { immutable: true, maxAge: '365d' });
  });
}
