import cors from '@fastify/cors';
import helmet from '@fastify/helmet';
import type { FastifyInstance } from 'fastify';
import type { HttpConfig } from '../config.ts';

/**
 * One CORS policy for REST and GraphQL, answered in the first hook so a preflight never
 * meets authentication. Never with credentials: the API key is a header a script sets, not a
 * cookie a browser adds, so no origin gets to act with a visitor's ambient authority.
 */
export async function installCors(app: FastifyInstance, config: Pick<HttpConfig, 'corsOrigins'>) {
  await app.register(cors, {
    origin: config.corsOrigins,
    credentials: false,
    methods: ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE'],
    // Scripts may read what a refusal tells them: when to retry, and where the caller stands; and
    // a browser's MCP client, the session /mcp gave it. The request headers a preflight asks for
    // are granted as asked (X-Api-Key, Authorization, Mcp-Session-Id, Mcp-Protocol-Version,
    // Last-Event-ID...): CORS without credentials protects nothing by refusing one.
    exposedHeaders: ['Allow', 'Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Mcp-Session-Id'],
    maxAge: 600,
    // An OPTIONS request without the preflight headers is answered too, not refused as text.
    strictPreflight: false,
  });
}

/**
 * The usual security headers (helmet's defaults: nosniff, frame and referrer policies, HSTS
 * over TLS, ...). Responses are JSON or event streams, never documents: their
 * Content-Security-Policy allows nothing. Pages (GraphiQL) set their own on their route.
 * `upgrade-insecure-requests` is left out: the service also runs on plain HTTP on loopback.
 */
export async function installSecurityHeaders(app: FastifyInstance) {
  await app.register(helmet, {
    contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
  });
}
