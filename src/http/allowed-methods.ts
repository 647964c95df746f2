import type { FastifyInstance } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';

const METHODS: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * The methods each path answers, matched by the router Fastify uses, so a request with a
 * method its path does not take can be told 405 and `Allow` rather than 404. Routes that match
 * every path (the CORS preflight's `OPTIONS *`) say nothing about a path, and are left out.
 * Call before any route is added.
 */
export function routeMethods(app: FastifyInstance) {
  const router = FindMyWay();
  app.addHook('onRoute', (route) => {
    if (route.url === '*' || route.url === '/*') return;
    for (const method of [route.method].flat()) router.on(method.toUpperCase() as HTTPMethod, route.url, () => {});
  });
  return (path: string) => METHODS.filter((method) => router.find(method, path) !== null);
}
