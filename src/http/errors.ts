import { STATUS_CODES } from 'node:http';
import secureJson from 'secure-json-parse';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { isDomainError, type DomainError, type ErrorCode } from '../domain/core/errors.ts';
import {
  DATABASE_UNAVAILABLE,
  isDatabaseUnavailable,
  nulCharacterError,
  RETRY_AFTER_SECONDS,
} from '../domain/core/stores/prisma-errors.ts';
import { describeInputError, MAX_JSON_DEPTH, nestsWithin } from '../domain/core/validation.ts';
import { routeMethods } from './allowed-methods.ts';

/**
 * How one REST resource reports errors. The original service used `{error}` for some
 * resources and `{message}` for others, and a few non-standard statuses; clients read them
 * as they are, so each resource declares its style in one place.
 */
export interface RestErrorStyle {
  /** `both`: `{error, message}` with the same text, as the original's session delete answered. */
  bodyKey: 'error' | 'message' | 'both';
  status?: Partial<Record<ErrorCode, number>>;
  /** Renders a domain field name the way REST clients spell it (snake_case). */
  fieldName?: (domainName: string) => string;
}

const defaultStatus: Record<ErrorCode, number> = {
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  BAD_USER_INPUT: 400,
  UNPROCESSABLE: 422,
  CONFLICT: 409,
  INSUFFICIENT_MANNA: 402,
  RATE_LIMITED: 429,
  TOO_MANY_SUBSCRIPTIONS: 429,
  TOO_MANY_STREAMS: 429,
  UNAVAILABLE: 503,
};

declare module 'fastify' {
  interface FastifyContextConfig {
    errors?: RestErrorStyle;
    /** No API key needed. */
    public?: boolean;
    /** GraphQL over HTTP: a key is optional, and refusals before GraphQL runs are GraphQL errors. */
    graphql?: boolean;
    /** The key may also come as `Authorization: Bearer <key>`, as MCP clients send it. */
    bearer?: boolean;
  }
}

/** The status a resource answers a domain error with. */
export const statusOf = (style: RestErrorStyle, code: ErrorCode) => style.status?.[code] ?? defaultStatus[code];

/** Error bodies, for the OpenAPI description: what `sendDomainError` and the transport errors send. */
export const errorBodies = {
  error: z.object({ error: z.string() }).meta({ id: 'ErrorBody' }),
  message: z.object({ message: z.string() }).meta({ id: 'MessageBody' }),
  both: z.object({ error: z.string(), message: z.string() }).meta({ id: 'ErrorMessageBody' }),
};

export function sendDomainError(reply: FastifyReply, error: DomainError, style: RestErrorStyle = { bodyKey: 'error' }) {
  const status = statusOf(style, error.code);
  const text = describeInputError(error.message, error.fieldPath, style.fieldName);
  return reply.code(status).send(style.bodyKey === 'both' ? { error: text, message: text } : { [style.bodyKey]: text });
}

/** Statuses for transport-level failures; their bodies carry both keys so any client finds the text. */
const transportError = (reply: FastifyReply, status: number, error: string, message: string) => reply.code(status).send({ error, message });

/** Also answers 405 with `Allow` for a path that exists under other methods; call before adding routes. */
export function installErrorHandlers(app: FastifyInstance) {
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const domainError = isDomainError(error) ? error : nulCharacterError(error);
    if (domainError) return sendDomainError(reply, domainError, request.routeOptions.config.errors);
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      return transportError(reply, 413, 'Payload Too Large', 'Request body is larger than 1 MiB');
    if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
      return transportError(reply, 415, 'Unsupported Media Type', 'Send request bodies as application/json');
    if (isDatabaseUnavailable(error)) {
      request.log.warn({ err: error }, 'the database is unavailable');
      return transportError(reply.header('retry-after', String(RETRY_AFTER_SECONDS)), 503, 'Service Unavailable', DATABASE_UNAVAILABLE);
    }
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      return transportError(reply, error.statusCode, STATUS_CODES[error.statusCode] ?? 'Bad Request', error.message);
    }
    request.log.error({ err: error }, 'unhandled error');
    return transportError(reply, 500, 'Internal Server Error', 'Something went wrong on our side');
  });

  const methodsOf = routeMethods(app);
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!;
    const allowed = methodsOf(path);
    // A route that takes this method and still found nothing (a missing media file) is a 404.
    if (allowed.length === 0 || allowed.includes(request.method as (typeof allowed)[number]))
      return transportError(reply, 404, 'Not Found', `No route for ${request.method} ${path}`);
    return transportError(
      reply.header('allow', allowed.join(', ')),
      405,
      'Method Not Allowed',
      `${request.method} is not allowed on ${path}; it takes ${allowed.join(', ')}`,
    );
  });
}

/** Errors Fastify's router raises before any route runs: undecodable URLs and over-long ids. */
export function frameworkErrorHandler(error: FastifyError, _request: FastifyRequest, reply: FastifyReply) {
  return error.code === 'FST_ERR_MAX_PARAM_LENGTH'
    ? transportError(reply, 414, 'URI Too Long', 'A path parameter is longer than allowed')
    : transportError(reply, 400, 'Bad Request', 'The request URL is not valid');
}

/**
 * How deep any JSON body may nest, whatever the route: room for a body's own levels around the
 * free-form JSON some fields take (each bounded to `MAX_JSON_DEPTH` by its own check, with a
 * message naming it). Nothing past it reaches a route, whose checks and stores may recurse.
 */
export const MAX_BODY_DEPTH = 2 * MAX_JSON_DEPTH;

/**
 * JSON bodies only: an empty body reads as "no body" (so handlers can say which field is
 * missing), and other content types are a 415 rather than a string the handlers misread.
 * A `__proto__` key is refused (as Fastify's own parser does): copied into an object it
 * would set the prototype instead of a field, and vanish from validation.
 */
export function installJsonParser(app: FastifyInstance) {
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    let parsed: unknown;
    try {
      parsed = secureJson.parse(text, { protoAction: 'error', constructorAction: 'error' });
    } catch (e) {
      return done(Object.assign(new Error(`Malformed JSON in request body: ${(e as Error).message}`), { statusCode: 400 }), undefined);
    }
    if (!nestsWithin(parsed, MAX_BODY_DEPTH))
      return done(
        Object.assign(new Error(`The request body nests objects and lists more than ${MAX_BODY_DEPTH} levels deep`), { statusCode: 400 }),
        undefined,
      );
    done(null, parsed);
  });
}
