import { readFileSync } from 'node:fs';
import { OpenAPIRegistry, OpenApiGeneratorV31, type ResponseConfig } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import type { ErrorCode } from '../domain/core/errors.ts';
import { errorBodies, statusOf } from '../http/errors.ts';
import { operation, type RestOperation } from './operation.ts';

const MEANING: Record<ErrorCode, string> = {
  UNAUTHENTICATED: 'not signed in',
  FORBIDDEN: 'not allowed (not yours)',
  NOT_FOUND: 'not found',
  BAD_USER_INPUT: 'invalid input; the message names the field',
  UNPROCESSABLE: 'over a limit',
  CONFLICT: 'already taken',
  INSUFFICIENT_MANNA: 'the balance cannot cover it (nothing was taken)',
  RATE_LIMITED: 'over the rate limit of your tier (see Retry-After)',
  TOO_MANY_SUBSCRIPTIONS: 'too many open subscriptions and streams for this key',
  TOO_MANY_STREAMS: 'too many replies streaming to this key at once',
  UNAVAILABLE: 'cannot be done now (a platform out of reach, a setting missing); nothing changed',
};

/** What an event stream answers, named by the schema of its frames (`SessionStreamFrame`). */
const streamNote = (frames: z.ZodType) =>
  `An event stream: each \`data:\` line is a ${z.globalRegistry.get(frames)?.id ?? 'frame'}, with an \`id:\` line for Last-Event-ID. \`update\` frames carry the events; a stream that ends early sends an \`error\` frame saying why and where to resume; the last frame is \`done\`.`;

/** Every error a route may answer, grouped by status; a status with more than one body shape lists them all. */
function errorResponses(op: RestOperation): Record<string, ResponseConfig> {
  const byStatus = new Map<number, { reasons: string[]; bodies: Set<z.ZodType> }>();
  const add = (status: number, reason: string, body: z.ZodType) => {
    const entry = byStatus.get(status) ?? { reasons: [], bodies: new Set() };
    if (!entry.reasons.includes(reason)) entry.reasons.push(reason);
    byStatus.set(status, { reasons: entry.reasons, bodies: entry.bodies.add(body) });
  };
  if (!op.public) add(401, 'missing or invalid API key', errorBodies.error);
  for (const code of op.errors?.codes ?? []) add(statusOf(op.errors!.style, code), MEANING[code], errorBodies[op.errors!.style.bodyKey]);
  if (op.body) {
    add(400, 'malformed JSON', errorBodies.both);
    add(413, 'body over 1 MiB', errorBodies.both);
    add(415, 'body not application/json', errorBodies.both);
  }
  // Every route is rate-limited, and any may find the database out of reach.
  add(429, MEANING.RATE_LIMITED, errorBodies[op.errors?.style.bodyKey ?? 'error']);
  add(500, 'unexpected failure (no details)', errorBodies.both);
  add(503, 'the database is out of reach (see Retry-After)', errorBodies.both);
  return Object.fromEntries(
    [...byStatus].map(([status, { reasons, bodies }]) => {
      const schema = bodies.size === 1 ? [...bodies][0]! : z.union([...bodies]);
      return [
        String(status),
        { description: reasons.map((r) => r[0]!.toUpperCase() + r.slice(1)).join('; '), content: { 'application/json': { schema } } },
      ];
    }),
  );
}

function successResponse(op: RestOperation): ResponseConfig {
  const { json, events } = op.ok;
  const note = events ? streamNote(events) : '';
  return {
    description:
      events && !json ? note : events ? `The session id; with \`stream: true\`, ${note[0]!.toLowerCase()}${note.slice(1)}` : 'OK',
    content: {
      ...(json ? { 'application/json': { schema: json } } : {}),
      ...(events ? { 'text/event-stream': { schema: events } } : {}),
    },
  };
}

const parameterNames = (path: string) => [...path.matchAll(/:(\w+)/g)].map((m) => m[1]!);

/** The OpenAPI 3.1 document of these operations, from their own declarations. */
export function describeOperations(operations: readonly RestOperation[]) {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'ApiKey', {
    type: 'apiKey',
    in: 'header',
    name: 'X-Api-Key',
    description: 'A key from `parley keys create` (shown once)',
  });
  for (const op of operations) {
    const params = parameterNames(op.path);
    registry.registerPath({
      operationId: op.operationId,
      method: op.method,
      path: op.path.replace(/:(\w+)/g, '{$1}'),
      tags: [op.tag],
      summary: op.summary,
      ...(op.public ? { security: [] } : {}),
      request: {
        ...(params.length ? { params: z.object(Object.fromEntries(params.map((p) => [p, z.string()]))) } : {}),
        ...(op.query ? { query: op.query } : {}),
        ...(op.headers ? { headers: op.headers } : {}),
        ...(op.body ? { body: { required: true, content: { 'application/json': { schema: op.body } } } } : {}),
      },
      responses: { [op.created ? 201 : 200]: successResponse(op), ...errorResponses(op) },
    });
  }
  const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'parley REST API',
      version,
      description:
        'The REST layer of parley: the operations of the Agent and Session Service Interface 8.14.0 with its body shapes and error texts, and what sessions need besides. Field names are snake_case where the original used them. The same service is also a GraphQL API at /graphql.',
    },
    security: [{ ApiKey: [] }],
  });
}

/**
 * `GET /v2/openapi.json`: the document of `operations` and of itself, built from the
 * declarations once, on first request.
 */
export function openApiOperation(operations: readonly RestOperation[]): RestOperation {
  let document: Record<string, unknown> | undefined;
  const self: RestOperation = operation({
    operationId: 'getOpenApi',
    method: 'get',
    path: '/v2/openapi.json',
    tag: 'Meta',
    summary: 'This description of the REST API (OpenAPI 3.1)',
    public: true,
    ok: { json: z.record(z.string(), z.unknown()) },
    handler: async (): Promise<Record<string, unknown>> => (document ??= { ...describeOperations([...operations, self]) }),
  });
  return self;
}
