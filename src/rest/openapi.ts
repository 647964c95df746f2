import { readFileSync } from 'node:fs';
import { OpenAPIRegistry, OpenApiGeneratorV31, type ResponseConfig } from '@asteasolutions/zod-to-openapi';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { agentPatchSchema } from '../domain/agents/inputs.ts';
import { conceptPatchSchema } from '../domain/concepts/inputs.ts';
import type { ErrorCode } from '../domain/core/errors.ts';
import { searchInput } from '../domain/search/inputs.ts';
import { pageSchema } from '../domain/core/cursors.ts';
import { reactionSchema, sendMessageSchema, sessionUserSchema } from '../domain/sessions/inputs.ts';
import { DEFAULT_MESSAGE_PAGE, MAX_MESSAGE_PAGE } from '../domain/sessions/service.ts';
import { agentErrors, agentNames, restAgentSchema } from './agents.ts';
import { apiKeyErrors } from './api-keys.ts';
import { conceptErrors, conceptNames, restConceptSchema } from './concepts.ts';
import { creationErrors, restSearchPageSchema } from './creations.ts';
import { numberedPageSchema } from '../domain/sessions/inputs.ts';
import { restProfileSchema } from './creators.ts';
import { restDeploymentSchema } from './deployments.ts';
import { errorBodies, statusOf, type RestErrorStyle } from '../http/errors.ts';
import { memoryErrors, restMemorySchema } from './memories.ts';
import { modelErrors, restModelSchema } from './models.ts';
import { restMessageSchema, restSessionSchema, restShareSchema, restStreamFrameSchema, sessionNames } from './session-shapes.ts';
import {
  cancelBodySchema,
  listNames,
  renameBodySchema,
  sessionDeleteErrors,
  sessionErrors,
  sessionExtraErrors,
  sessionRenameErrors,
  shareBodySchema,
  shareErrors,
} from './sessions.ts';
import { restToolSchema, toolErrors } from './tools.ts';
import { restTriggerSchema } from './triggers.ts';

export const OPENAPI_PATH = '/v2/openapi.json';

interface Operation {
  id: string;
  method: 'get' | 'post' | 'patch' | 'delete';
  /** As Fastify has the route: `/v2/agents/:agentId`. */
  path: string;
  tag: string;
  summary: string;
  /** No API key needed. */
  public?: boolean;
  query?: z.ZodObject;
  headers?: z.ZodObject;
  body?: z.ZodType;
  /** The success body: JSON, an event stream, or either (`stream: true`). */
  ok: { json?: z.ZodType; events?: true };
  /** 201 instead of 200, where the original answered so. */
  created?: true;
  /** Domain errors it may answer, in its resource's style. */
  errors?: { style: RestErrorStyle; codes: ErrorCode[] };
}

const MEANING: Record<ErrorCode, string> = {
  UNAUTHENTICATED: 'not signed in',
  FORBIDDEN: 'not allowed (not yours)',
  NOT_FOUND: 'not found',
  BAD_USER_INPUT: 'invalid input; the message names the field',
  UNPROCESSABLE: 'over a limit',
  CONFLICT: 'already taken',
  RATE_LIMITED: 'over the rate limit of your tier (see Retry-After)',
  TOO_MANY_SUBSCRIPTIONS: 'too many open subscriptions and streams for this key',
  TOO_MANY_STREAMS: 'too many replies streaming to this key at once',
};

const id = z.string();
const success = z.boolean();
const nextCursor = z.string().nullable().meta({ description: 'Pass as `cursor` for the next page; null on the last one' });

/** Shared sessions page by 100 unless told otherwise (the original's default); other lists by 20. */
const listQuery = listNames.schema(pageSchema);
const sharedListQuery = listQuery.extend({ limit: (listQuery.shape.limit as z.ZodDefault<z.ZodNumber>).removeDefault().default(100) });

const messagesQuery = z.object({
  limit: z.coerce.number().int().min(0).max(MAX_MESSAGE_PAGE).default(DEFAULT_MESSAGE_PAGE),
  before: z.string().optional().meta({ description: 'olderCursor of a page: the messages before it (the default is the latest)' }),
  after: z.string().optional().meta({ description: 'newerCursor of a page: the messages after it' }),
});

const resume = {
  query: z.object({
    after: z.string().regex(/^\d+$/).optional().meta({ description: 'The id of the last event received (same as Last-Event-ID)' }),
  }),
  headers: z.object({ 'last-event-id': z.string().regex(/^\d+$/).optional() }),
};

const STREAM_NOTE =
  'An event stream: each `data:` line is a SessionStreamFrame, with an `id:` line for Last-Event-ID. `update` frames carry the events; a stream that ends early sends an `error` frame saying why and where to resume; the last frame is `done`.';

/** Every REST route: the spec's 18 operations, and what sessions, memories and this document need besides. */
const operations: Operation[] = [
  {
    id: 'listSharedSessions',
    method: 'get',
    path: '/v2/sessions/shared',
    tag: 'Sessions - Permissions',
    summary: 'Sessions shared with you',
    query: sharedListQuery,
    ok: { json: z.object({ sharedSessions: z.array(restSessionSchema), nextCursor }) },
    errors: { style: shareErrors, codes: ['BAD_USER_INPUT'] },
  },
  {
    id: 'deleteApiKey',
    method: 'delete',
    path: '/apikeys',
    tag: 'API Keys',
    summary: 'Delete one of your API keys (for good, at once)',
    body: z.object({ apiKey: z.string() }),
    ok: { json: z.object({}).strict() },
    errors: { style: apiKeyErrors, codes: ['BAD_USER_INPUT', 'NOT_FOUND'] },
  },
  {
    id: 'updateAgent',
    method: 'patch',
    path: '/v2/agents/:agentId',
    tag: 'Agents',
    summary: 'Update an agent you own (only the fields sent change)',
    body: agentNames.schema(agentPatchSchema).extend({
      tools: z
        .record(z.string(), z.union([z.boolean(), z.array(z.string())]))
        .optional()
        .meta({ description: "Tool key to true (on) or false (off); the original's list of strings also turns a tool on" }),
    }),
    ok: { json: z.object({ agentId: id, agent: restAgentSchema }) },
    errors: { style: agentErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT', 'CONFLICT', 'UNPROCESSABLE'] },
  },
  {
    id: 'sendMessage',
    method: 'post',
    path: '/v2/sessions',
    tag: 'Sessions',
    summary: 'Send a message to a session, or start one with it; with `stream: true`, watch the replies',
    body: sessionNames.schema(sendMessageSchema).extend({
      stream: z.boolean().optional().meta({ description: 'Answer with the event stream of this prompt instead of its session id' }),
    }),
    ok: {
      json: z.object({
        session_id: id,
        message_id: id.nullable().meta({ description: 'The saved message (null when only settings were sent)' }),
      }),
      events: true,
    },
    errors: { style: sessionErrors, codes: ['BAD_USER_INPUT', 'FORBIDDEN', 'NOT_FOUND'] },
  },
  {
    id: 'updateConcept',
    method: 'patch',
    path: '/v2/concepts/:conceptId',
    tag: 'Concepts V2',
    summary: 'Update a concept you own',
    body: conceptNames.schema(conceptPatchSchema),
    ok: { json: z.object({ concept: restConceptSchema }) },
    errors: { style: conceptErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
  },
  {
    id: 'reactToMessage',
    method: 'post',
    path: '/v2/sessions/react',
    tag: 'Sessions',
    summary: 'React to a message (the same reaction again takes it back)',
    body: sessionNames.schema(reactionSchema),
    ok: { json: z.object({ success, message: z.string() }) },
    errors: { style: sessionErrors, codes: ['BAD_USER_INPUT', 'FORBIDDEN', 'NOT_FOUND'] },
  },
  {
    id: 'listTools',
    method: 'get',
    path: '/v2/tools',
    tag: 'Tools',
    summary: 'The tools agents can use, in display order',
    ok: { json: z.object({ tools: z.array(restToolSchema) }) },
  },
  {
    id: 'getTool',
    method: 'get',
    path: '/v2/tools/:toolKey',
    tag: 'Tools',
    summary: 'One tool of the list, by key',
    ok: { json: z.object({ tool: restToolSchema }) },
    errors: { style: toolErrors, codes: ['NOT_FOUND'] },
  },
  {
    id: 'searchCreations',
    method: 'get',
    path: '/v2/creations/search',
    tag: 'Creations',
    summary: 'Search creations by meaning (embeddings), a page at a time',
    query: searchInput,
    ok: { json: restSearchPageSchema },
    errors: { style: creationErrors, codes: ['BAD_USER_INPUT'] },
  },
  {
    id: 'deleteSession',
    method: 'delete',
    path: '/v2/sessions/:session_id',
    tag: 'Sessions',
    summary: 'Delete a session you own, with its messages',
    ok: { json: z.object({ success }) },
    errors: { style: sessionDeleteErrors, codes: ['FORBIDDEN', 'NOT_FOUND'] },
  },
  {
    id: 'getModel',
    method: 'get',
    path: '/v2/models/:modelId',
    tag: 'Models',
    summary: 'A model (LoRA) of yours, or a public one',
    ok: { json: z.object({ model: restModelSchema }) },
    errors: { style: modelErrors, codes: ['FORBIDDEN', 'NOT_FOUND'] },
  },
  {
    id: 'unlikeCreation',
    method: 'delete',
    path: '/v2/creations/:creationId/like',
    tag: 'Creations',
    summary: 'Take back your like',
    ok: { json: z.object({ message: z.string() }) },
    errors: { style: creationErrors, codes: ['NOT_FOUND'] },
  },
  {
    id: 'likeCreation',
    method: 'post',
    path: '/v2/creations/:creationId/like',
    tag: 'Creations',
    summary: 'Like a creation you can see',
    ok: { json: z.object({ message: z.string() }) },
    errors: { style: creationErrors, codes: ['NOT_FOUND', 'BAD_USER_INPUT'] },
  },
  {
    id: 'getMyProfile',
    method: 'get',
    path: '/v2/creators/me',
    tag: 'Creators',
    summary: 'Your creator profile and manna balances',
    ok: { json: restProfileSchema },
  },
  {
    id: 'getConcept',
    method: 'get',
    path: '/v2/concepts/:conceptId',
    tag: 'Concepts V2',
    summary: 'A concept of yours, or a public one',
    ok: { json: z.object({ concept: restConceptSchema }) },
    errors: { style: conceptErrors, codes: ['FORBIDDEN', 'NOT_FOUND'] },
  },
  {
    id: 'listDeployments',
    method: 'get',
    path: '/v2/agents/deployments',
    tag: 'Agents - Deployments',
    summary: 'Deployments of the agents you own, newest first',
    ok: { json: z.object({ deployments: z.array(restDeploymentSchema) }) },
  },
  {
    id: 'listTriggers',
    method: 'get',
    path: '/v2/agents/triggers',
    tag: 'Agents - Triggers',
    summary: 'Triggers of the agents you own, newest first',
    ok: { json: z.object({ triggers: z.array(restTriggerSchema) }) },
  },
  {
    id: 'getAgent',
    method: 'get',
    path: '/v2/agents/:agentId',
    tag: 'Agents',
    summary: 'An agent of yours, or a public one',
    ok: { json: z.object({ agent: restAgentSchema }) },
    errors: { style: agentErrors, codes: ['FORBIDDEN', 'NOT_FOUND'] },
  },
  {
    id: 'getSharedSession',
    method: 'get',
    path: '/v2/sessions/share/:share_id',
    tag: 'Sessions',
    summary: 'A publicly shared session, as it was when shared',
    public: true,
    ok: { json: z.object({ share: restShareSchema }) },
    errors: { style: shareErrors, codes: ['NOT_FOUND'] },
  },

  {
    id: 'listMySessions',
    method: 'get',
    path: '/v2/sessions',
    tag: 'Sessions',
    summary:
      'A numbered page (`docs`...) of the sessions you own or were added to, and a cursor page (`sessions`) of those you own; latest activity first',
    query: listQuery.extend({
      page: numberedPageSchema.shape.page,
      agent_id: z
        .string()
        .optional()
        .meta({ description: "Only sessions with this agent (its key); unknown: 404 {message:'Agent not found'}" }),
    }),
    ok: {
      json: restSearchPageSchema.extend({ docs: z.array(restSessionSchema), sessions: z.array(restSessionSchema), nextCursor }),
    },
    errors: { style: sessionErrors, codes: ['BAD_USER_INPUT', 'NOT_FOUND'] },
  },
  {
    id: 'createSession',
    method: 'post',
    path: '/v2/sessions/create',
    tag: 'Sessions',
    summary: 'Start a session without a message (agent_ids required)',
    body: sessionNames.schema(sendMessageSchema).omit({ session_id: true, content: true, attachments: true }),
    ok: { json: z.object({ success, session: restSessionSchema }) },
    created: true,
    errors: { style: sessionErrors, codes: ['BAD_USER_INPUT'] },
  },
  {
    id: 'renameSession',
    method: 'patch',
    path: '/v2/sessions/:session_id',
    tag: 'Sessions',
    summary: 'Rename a session you own',
    body: renameBodySchema,
    ok: { json: z.object({ success }) },
    errors: { style: sessionRenameErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
  },
  {
    id: 'deleteShare',
    method: 'delete',
    path: '/v2/sessions/share/:share_id',
    tag: 'Sessions - Permissions',
    summary: 'Take down a share you made',
    ok: { json: z.object({ success }) },
    errors: { style: shareErrors, codes: ['FORBIDDEN', 'NOT_FOUND'] },
  },
  {
    id: 'getSession',
    method: 'get',
    path: '/v2/sessions/:session_id',
    tag: 'Sessions',
    summary: 'A session and a page of its messages (the latest, or around a cursor)',
    query: messagesQuery,
    ok: {
      json: z.object({
        session: restSessionSchema.extend({ messages: z.array(restMessageSchema).meta({ description: 'The same page as messages' }) }),
        messages: z.array(restMessageSchema),
        page: z.object({ hasOlder: success, hasNewer: success, olderCursor: z.string().nullable(), newerCursor: z.string().nullable() }),
      }),
    },
    errors: { style: sessionErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
  },
  {
    id: 'watchSession',
    method: 'get',
    path: '/v2/sessions/:session_id/events',
    tag: 'Sessions',
    summary: 'Everything that happens in a session, live; resumable with Last-Event-ID',
    ...resume,
    ok: { events: true },
    errors: { style: sessionErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
  },
  {
    id: 'cancelReplies',
    method: 'post',
    path: '/v2/sessions/:session_id/cancel',
    tag: 'Sessions',
    summary: 'Stop the replies being written (to one prompt, or all); their running tools are refunded',
    body: cancelBodySchema,
    ok: {
      json: z.object({
        status: z.literal('cancel_signal_sent'),
        session_id: id,
        success,
        cancelled: z.number().int().meta({ description: 'Prompts whose replies were stopped' }),
      }),
    },
    errors: { style: sessionExtraErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
  },
  {
    id: 'shareSession',
    method: 'post',
    path: '/v2/sessions/:session_id/share',
    tag: 'Sessions - Permissions',
    summary: 'Share a session you own publicly, up to a message (default: as it is now)',
    body: shareBodySchema,
    ok: { json: z.object({ success, share_id: id, share_url: z.string(), share: restShareSchema }) },
    created: true,
    errors: { style: sessionExtraErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
  },
  {
    id: 'addSessionUser',
    method: 'post',
    path: '/v2/sessions/:session_id/users',
    tag: 'Sessions - Permissions',
    summary: 'Let a user into a session you own, or change their permission',
    body: sessionUserSchema,
    ok: { json: z.object({ success, user: id, permission: sessionUserSchema.shape.permission }) },
    errors: { style: sessionErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
  },
  {
    id: 'removeSessionUser',
    method: 'delete',
    path: '/v2/sessions/:session_id/users/:user_id',
    tag: 'Sessions - Permissions',
    summary: 'Remove a user from a session you own',
    ok: { json: z.object({ success }) },
    errors: { style: sessionErrors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
  },
  {
    id: 'listMemories',
    method: 'get',
    path: '/v2/agents/:agentId/memories',
    tag: 'Agents - Memory',
    summary: 'What the agent remembers about you',
    ok: { json: z.object({ memories: z.array(restMemorySchema) }) },
    errors: { style: memoryErrors, codes: ['NOT_FOUND'] },
  },
  {
    id: 'forgetMemories',
    method: 'delete',
    path: '/v2/agents/:agentId/memories',
    tag: 'Agents - Memory',
    summary: 'Make the agent forget everything about you',
    ok: { json: z.object({ deleted: z.number().int() }) },
    errors: { style: memoryErrors, codes: ['NOT_FOUND'] },
  },
  {
    id: 'forgetMemory',
    method: 'delete',
    path: '/v2/agents/:agentId/memories/:memoryId',
    tag: 'Agents - Memory',
    summary: 'Make the agent forget one thing about you',
    ok: { json: z.object({ deleted: z.number().int() }) },
    errors: { style: memoryErrors, codes: ['NOT_FOUND'] },
  },
  {
    id: 'getOpenApi',
    method: 'get',
    path: OPENAPI_PATH,
    tag: 'Meta',
    summary: 'This description of the REST API (OpenAPI 3.1)',
    public: true,
    ok: { json: z.record(z.string(), z.unknown()) },
  },
];

/** Every error a route may answer, grouped by status; a status with more than one body shape lists them all. */
function errorResponses(op: Operation): Record<string, ResponseConfig> {
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

const parameterNames = (path: string) => [...path.matchAll(/:(\w+)/g)].map((m) => m[1]!);

function buildDocument() {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'ApiKey', {
    type: 'apiKey',
    in: 'header',
    name: 'X-Api-Key',
    description: 'A key from `parley keys create` (shown once)',
  });
  for (const op of operations) {
    const params = parameterNames(op.path);
    const success: ResponseConfig = {
      description:
        op.ok.events && !op.ok.json
          ? STREAM_NOTE
          : op.ok.events
            ? `The session id; with \`stream: true\`, ${STREAM_NOTE[0]!.toLowerCase()}${STREAM_NOTE.slice(1)}`
            : 'OK',
      content: {
        ...(op.ok.json ? { 'application/json': { schema: op.ok.json } } : {}),
        ...(op.ok.events ? { 'text/event-stream': { schema: restStreamFrameSchema } } : {}),
      },
    };
    registry.registerPath({
      operationId: op.id,
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
      responses: { [op.created ? 201 : 200]: success, ...errorResponses(op) },
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

/** The description is built from the schemas once, on first request. */
export function openApiRoute(app: FastifyInstance) {
  let document: ReturnType<typeof buildDocument> | undefined;
  app.get(OPENAPI_PATH, { config: { public: true } }, async () => (document ??= buildDocument()));
}
