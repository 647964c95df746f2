import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { ErrorCode } from '../domain/core/errors.ts';
import { parseInput } from '../domain/core/validation.ts';
import type { Services } from '../domain/services.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import type { StreamContext } from './session-stream.ts';

/** What handlers are given besides the request: the services, and how session streams are written. */
export interface RestContext {
  services: Services;
  stream: StreamContext;
}

/** `/v2/agents/:agentId/memories/:memoryId` → `{ agentId: string; memoryId: string }`. */
export type PathParams<P extends string> = P extends `${string}:${infer Name}/${infer Rest}`
  ? { [K in Name]: string } & PathParams<Rest>
  : P extends `${string}:${infer Name}`
    ? { [K in Name]: string }
    : Record<never, never>;

/** The query string as it arrives: the declared names, as strings (the domain parses them). */
type RawQuery<Q> = Q extends z.ZodObject ? { [K in keyof z.input<Q>]?: string } : unknown;

export type RestRequest<P extends string, Q> = FastifyRequest<{ Params: PathParams<P>; Querystring: RawQuery<Q>; Body: unknown }>;

/**
 * One REST operation, declared once: the route Fastify serves and its entry in the OpenAPI
 * document (`openapi.ts`) both come from it. Path parameters are the path's `:names`.
 */
export interface RestOperation<P extends string = string, Q extends z.ZodObject | undefined = any, J extends z.ZodType | undefined = any> {
  operationId: string;
  method: 'get' | 'post' | 'patch' | 'delete';
  /** As Fastify routes it, and as route metrics label it: `/v2/agents/:agentId`. */
  path: P;
  tag: string;
  summary: string;
  /** No API key needed. */
  public?: true;
  query?: Q;
  headers?: z.ZodObject;
  /**
   * The JSON body as callers spell it. It documents the body; the handler hands the body to the
   * domain service, whose schema checks it (input is validated once), or reads a body only REST
   * has with `parseBody`.
   */
  body?: z.ZodType;
  /**
   * The success body: JSON, an event stream (the schema of its frames: `restStreamFrameSchema`
   * for a session's, `feedFrameSchema` for a feed's), or either (`stream: true`).
   */
  ok: { json?: J; events?: z.ZodType };
  /** 201 instead of 200, where the original answered so. */
  created?: true;
  /**
   * How this resource answers domain errors (`http/errors.ts`), and the codes it may answer;
   * without it, `{error}` with the default statuses.
   */
  errors?: { style: RestErrorStyle; codes: ErrorCode[] };
  /** The success body (checked against `ok.json` when compiled), or the reply once it has streamed. */
  handler(request: RestRequest<P, Q>, reply: FastifyReply, context: RestContext): Promise<Answer<J>>;
}

type Answer<J> = (J extends z.ZodType ? z.input<J> : never) | FastifyReply;

/** Declares an operation; the path's parameters, the query and the success body type its handler. */
export const operation = <
  const P extends string,
  Q extends z.ZodObject | undefined = undefined,
  J extends z.ZodType | undefined = undefined,
>(
  declared: RestOperation<P, Q, J>,
): RestOperation<P, Q, J> => declared;

/** Serves an operation: its method and path, whether it needs a key, its error style, its status. */
export function serve(app: FastifyInstance, op: RestOperation, context: RestContext) {
  app.route({
    method: op.method.toUpperCase(),
    url: op.path,
    config: { public: op.public, errors: op.errors?.style },
    handler: (request, reply) => op.handler(request as RestRequest<string, unknown>, op.created ? reply.code(201) : reply, context),
  });
}

/**
 * Reads a body only REST has (no domain schema checks it) with the schema its declaration
 * documents: a bad one is a 400 naming the field, and changes nothing. No body reads as `{}`.
 */
export const parseBody = <S extends z.ZodType>(schema: S, body: unknown): z.output<S> => parseInput(schema, body ?? {});
