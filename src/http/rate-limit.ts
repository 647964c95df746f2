import type { FastifyReply, FastifyRequest } from 'fastify';
import { tooMany } from '../domain/core/errors.ts';
import { rateLimitedError, type RateLimiter } from '../limits/rate-limit.ts';
import { closeIfBodyUnread } from './auth.ts';
import { sendDomainError } from './errors.ts';

/** Probes and scrapes are never refused: a limit must not make an instance look dead. */
const UNLIMITED = new Set(['/healthz', '/metrics']);

/**
 * Counts every HTTP request once its caller is known (by key, or by address without a valid
 * one) and refuses those over the limit with 429 and `Retry-After`: REST in the route's own
 * error shape, GraphQL as a GraphQL error with `extensions.code` RATE_LIMITED. Every counted
 * response says where the caller stands (`RateLimit-Limit`, `-Remaining`, `-Reset`).
 * Returns false when it answered the request.
 */
export function rateLimitRequests(limiter: RateLimiter) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<boolean> => {
    if (request.routeOptions.url && UNLIMITED.has(request.routeOptions.url)) return true;
    const caller = request.viewer ?? null;
    const decision = await limiter.check(caller, request.ip);
    if (!decision) return true;
    reply
      .header('ratelimit-limit', decision.limit)
      .header('ratelimit-remaining', decision.remaining)
      .header('ratelimit-reset', decision.resetSeconds);
    if (decision.allowed) return true;
    reply.header('retry-after', decision.resetSeconds);
    closeIfBodyUnread(request, reply);
    const refusal = rateLimitedError(decision, caller !== null);
    if (request.routeOptions.config.graphql) await reply.code(429).send({ errors: [refusal] });
    else await sendDomainError(reply, tooMany('RATE_LIMITED', refusal.message), request.routeOptions.config.errors);
    return false;
  };
}
