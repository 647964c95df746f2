import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';

/**
 * The browser playground (playground/, built by Vite into dist/playground/ at install time):
 * a page where a person enters a key and talks to agents. Served from this origin only, under a
 * policy that lets it load nothing from elsewhere and talk to this service only (fetch and
 * graphql-ws). Its scripts and styles are files, so no inline script or style is allowed.
 */
export const PLAYGROUND_CSP = {
  defaultSrc: ["'none'"],
  scriptSrc: ["'self'"],
  styleSrc: ["'self'"],
  imgSrc: ["'self'", 'data:'],
  connectSrc: ["'self'"],
  baseUri: ["'none'"],
  formAction: ["'none'"],
  frameAncestors: ["'none'"],
};

// src/http/ and dist/http/ both sit two levels below the repository.
const builtDir = fileURLToPath(new URL('../../dist/playground/', import.meta.url));

export function playgroundRoutes(app: FastifyInstance) {
  const page = { config: { public: true }, helmet: { contentSecurityPolicy: { useDefaults: false, directives: PLAYGROUND_CSP } } };
  app.get('/', { config: { public: true } }, (_request, reply) => reply.redirect('/playground/'));
  app.get('/playground', { config: { public: true } }, (_request, reply) => reply.redirect('/playground/'));
  app.get('/playground/', page, (_request, reply) => {
    if (!existsSync(`${builtDir}index.html`))
      return reply
        .code(503)
        .type('text/plain; charset=utf-8')
        .send('The playground is not built: run `npm run build` (npm install does it).');
    // The page names its hashed assets: it must be fetched again after a rebuild.
    return reply.header('cache-control', 'no-cache').sendFile('index.html', builtDir);
  });
  // Hashed names: a file under assets/ never changes.
  app.get<{ Params: { '*': string } }>('/playground/assets/*', page, (request, reply) =>
    reply.sendFile(request.params['*'], `${builtDir}assets`, { immutable: true, maxAge: '365d' }),
  );
}
