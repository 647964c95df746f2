import { join, resolve } from 'node:path';
import { z } from 'zod';

const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);
const listed = (value: string) =>
  value
    .split(',')
    .map((o) => o.trim().replace(/\/+$/, ''))
    .filter(Boolean);
const isOrigin = (value: string) => URL.canParse(value) && new URL(value).origin === value;

const envSchema = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65535).default(4000),
    HOST: z.string().min(1).default('127.0.0.1'),
    DATABASE_URL: z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://')
      .optional(),
    DATABASE_CONNECT_TIMEOUT_MS: positiveInt(5_000),
    DATA_DIR: z.string().min(1).default('./data'),
    REDIS_KEY_PREFIX: z
      .string()
      .max(64)
      .regex(/^[\w:.{}-]*$/, 'may hold letters, digits and _ : . - { } only')
      .default(''),
    INSTANCE_HEARTBEAT_MS: z.coerce.number().int().min(100).default(5_000),
    REDIS_URL: z
      .string()
      .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
      .optional(),
    MEDIA_DIR: z.string().min(1).optional(),
    PUBLIC_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
    TOOLS_DIR: z.string().min(1).default('./tools'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),

    LLM_BASE_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
    LLM_API_KEY: z.string().optional(),
    LLM_MODEL: z.string().min(1).default('gpt-4o-mini'),
    LLM_MODEL_LOW: z.string().min(1).optional(),
    LLM_MODEL_MEDIUM: z.string().min(1).optional(),
    LLM_MODEL_HIGH: z.string().min(1).optional(),
    LLM_CONTEXT_TOKENS: positiveInt(16_000),
    LLM_MAX_COMPLETION_TOKENS: positiveInt(1_024),
    LLM_FIRST_TOKEN_TIMEOUT_MS: positiveInt(60_000),
    LLM_IDLE_TIMEOUT_MS: positiveInt(30_000),
    LLM_MAX_CALL_MS: positiveInt(300_000),
    OFFLINE_TOKEN_DELAY_MS: z.coerce.number().int().min(0).default(25),
    REPLY_CHECKPOINT_MS: z.coerce.number().int().min(0).default(2_000),

    EVENT_REPLAY_LIMIT: positiveInt(5_000),
    EVENT_IDLE_TTL_MS: positiveInt(600_000),
    ACCESS_RECHECK_MS: positiveInt(2_000),
    STREAM_BUFFER_BYTES: positiveInt(1024 * 1024),
    SLOW_CLIENT_MS: positiveInt(30_000),
    SSE_HEARTBEAT_MS: positiveInt(15_000),
    SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).default(10_000),
    WS_MAX_MESSAGE_BYTES: positiveInt(1024 * 1024),
    WS_MAX_OPERATIONS: positiveInt(100),
    WS_MAX_SOCKETS_PER_KEY: positiveInt(20),

    REQUEST_TIMEOUT_MS: positiveInt(30_000),
    KEEP_ALIVE_TIMEOUT_MS: positiveInt(5_000),
    MAX_CONNECTIONS: z.coerce.number().int().positive().optional(),
    CORS_ORIGINS: z
      .string()
      .default('*')
      .refine(
        (v) => listed(v).every((o) => o === '*' || isOrigin(o)),
        'must be * or a comma-separated list of origins such as https://app.example.com',
      ),
    MAX_AGENTS_PER_USER: positiveInt(100),
    MESSAGE_PAGE_MAX_BYTES: positiveInt(1024 * 1024),
    TOOL_CALLS_PER_MODEL_CALL: positiveInt(8),
    TOOL_CALLS_PER_REPLY: positiveInt(24),
    TOOL_RUNS_PER_USER: positiveInt(4),
    TOOL_RUNS_PER_PROCESS: positiveInt(8),
    IMAGE_WORKERS: positiveInt(2),
    GRAPHQL_IN_FLIGHT_PER_KEY: positiveInt(16),
    REACTIONS_PER_USER_MESSAGE: positiveInt(10),
    EVENT_REPLAY_BYTES: positiveInt(16 * 1024 * 1024),
    TRUST_PROXY: z
      .string()
      .optional()
      .refine(
        (v) => v === undefined || /^(true|false|\d+)$/.test(v) || listed(v).every((a) => /^[\d.:a-fA-F/]+$/.test(a)),
        'must be true, false, a number of hops, or a comma-separated list of proxy addresses',
      ),

    RATE_LIMIT_WINDOW_MS: positiveInt(60_000),
    RATE_LIMIT_DEFAULT: z.coerce.number().int().min(0).default(300),
    RATE_LIMIT_ANONYMOUS: z.coerce.number().int().min(0).default(120),
    MAX_SUBSCRIPTIONS_PER_KEY: positiveInt(100),
    MAX_STREAMS_PER_KEY: positiveInt(10),
    LIMIT_SLOT_TTL_MS: z.coerce.number().int().min(1_000).default(30_000),
    APQ_MAX_ENTRIES: positiveInt(1_000),
    APQ_TTL_MS: positiveInt(24 * 60 * 60 * 1000),

    METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),

    EMBEDDINGS_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL such as http://127.0.0.1:7997/v1' }).optional(),
    EMBEDDINGS_MODEL: z.string().min(1).optional(),
    EMBEDDINGS_API_KEY: z.string().min(1).optional(),
    EMBEDDINGS_BATCH_SIZE: z.coerce.number().int().min(1).max(2048).default(32),
    EMBEDDINGS_TIMEOUT_MS: z.coerce.number().int().min(1).default(30_000),
    EMBEDDINGS_RETRIES: z.coerce.number().int().min(0).max(10).default(3),
    SEARCH_MIN_SCORE: z.coerce.number().min(-1).max(1).optional(),
    SEARCH_MAX_RESULTS: z.coerce.number().int().min(1).max(10_000).default(200),
    SEARCH_EF_SEARCH: z.coerce.number().int().min(1).max(1000).default(200),
  })
  .refine((e) => !e.EMBEDDINGS_URL || e.EMBEDDINGS_MODEL, { path: ['EMBEDDINGS_MODEL'], message: 'is required with EMBEDDINGS_URL' });

export type DatabaseConfig =
  /** `connectTimeoutMs`: how long opening a connection may take before the request fails (503). */
  | { kind: 'postgres'; url: string; connectTimeoutMs?: number }
  /** `dataDir` undefined means an in-memory database (tests). */
  | { kind: 'pglite'; dataDir: string | undefined };

export interface LlmConfig {
  /** Unset: the built-in offline responder answers. */
  baseUrl: string | undefined;
  apiKey: string | undefined;
  /** Model name per `llm_settings.model_profile`, and the one used when an agent names none. */
  models: { default: string; low: string; medium: string; high: string };
  contextTokens: number;
  maxCompletionTokens: number;
  /** Until the provider's first chunk (this is also when a failed call may be retried once). */
  firstTokenTimeoutMs: number;
  /** Longest silence between two chunks once a reply is streaming. */
  idleTimeoutMs: number;
  /** Longest one model call may stream, however steadily (a provider that never stops is cut off). */
  maxCallMs: number;
  /** Pause between the offline responder's tokens, so it streams like a model would. */
  offlineTokenDelayMs: number;
  /** How often a streaming reply's text so far is saved (what survives a crash); 0: only at its end. */
  checkpointMs: number;
}

export interface EventsConfig {
  /** Events kept per session for clients that resume with `after` / Last-Event-ID. */
  replayLimit: number;
  /** And at most about this many bytes of them: the oldest go first past either bound. */
  replayBytes: number;
  /** A session with no watcher and no event for this long forgets its replay log. */
  idleTtlMs: number;
  /** Output an SSE stream may have waiting for a client; past it, writing waits for the client. */
  streamBufferBytes: number;
  /** A client that leaves its stream or WebSocket output unread this long is cut off as too slow. */
  slowClientMs: number;
  heartbeatMs: number;
  /**
   * An open watch delivers only while its viewer's access (session membership, API key) was
   * confirmed within this; every open watch is re-checked together, in a few statements.
   */
  accessRecheckMs: number;
}

export interface HttpConfig {
  /** A whole request, headers and body, must arrive within this time (408 and the socket closes). */
  requestTimeoutMs: number;
  /** An idle keep-alive connection closes after this long without a new request. */
  keepAliveTimeoutMs: number;
  /** Open connections (WebSockets included) past which new ones are refused; unset: from the open-file limit. */
  maxConnections: number | undefined;
  /** Origins browsers may call the API from; `*` for any (never with credentials). */
  corsOrigins: '*' | string[];
  /** Fastify's `trustProxy`: which proxies' `X-Forwarded-For` names the client (per-IP limits). */
  trustProxy: boolean | number | string[];
}

/** What one API key (or, without one, one IP address) may do; 0 in a rate means no limit. */
export interface LimitsConfig {
  rate: {
    windowMs: number;
    /** Requests per window per key, by subscription tier (normalized by `tierName`). */
    perTier: Record<string, number>;
    /** For tiers not in `perTier`. */
    default: number;
    /** Per IP address, for requests without a valid key. */
    anonymous: number;
  };
  /** Subscriptions and event streams one key may hold open, over every transport together. */
  maxSubscriptionsPerKey: number;
  /** Replies streamed at once to one key (`stream: true`, `Subscription.sendMessage`). */
  maxStreamsPerKey: number;
  /** With Redis, how long a slot outlives the instance holding it if that instance dies. */
  slotTtlMs: number;
}

/** How much work one request, prompt or user may cause (see docs/security.md). */
export interface WorkConfig {
  /** A page of messages stops before this many bytes of text (it always holds at least one message). */
  messagePageMaxBytes: number;
  /** Tool calls run per model call; the model is told the rest were not run. */
  toolCallsPerModelCall: number;
  /** Tool calls run per reply, over all its model calls. */
  toolCallsPerReply: number;
  /** Tool calls running at once for one paying user, and in this process; more wait their turn. */
  toolRunsPerUser: number;
  toolRunsPerProcess: number;
  /** Worker threads painting images, off the event loop. */
  imageWorkers: number;
  /** GraphQL operations one API key may have executing at once, over HTTP and WebSockets. */
  graphqlInFlightPerKey: number;
  /** Reactions one user may have on one message. */
  reactionsPerUserMessage: number;
}

/** Automatic persisted queries: the hash-to-query store, bounded. */
export interface ApqConfig {
  maxEntries: number;
  ttlMs: number;
}

export type EmbeddingsConfig =
  | { kind: 'hashed-ngrams' }
  | { kind: 'http'; url: string; model: string; apiKey?: string; batchSize: number; timeoutMs: number; retries: number };

export interface SearchConfig {
  embeddings: EmbeddingsConfig;
  /** Cosine similarity a match needs; unset: the provider's default. */
  minScore?: number;
  /** At most this many nearest creations are ranked per query (the top-K window). */
  maxResults: number;
  /** `hnsw.ef_search` for search queries (pgvector's default is 40). */
  efSearch: number;
}

/** What one WebSocket (and one API key's sockets together) may hold. */
export interface WebSocketConfig {
  /** A larger message closes the socket (1009). */
  maxMessageBytes: number;
  /** Queries, mutations and subscriptions under way on one socket. */
  maxOperations: number;
  maxSocketsPerKey: number;
}

export interface Config {
  port: number;
  host: string;
  database: DatabaseConfig;
  /** Unset: one instance, live events and counters in process. Set: instances share them here. */
  redisUrl: string | undefined;
  /** Put before every Redis key, so separate deployments can share one Redis. */
  redisKeyPrefix: string;
  /** With Redis: how often an instance says it is alive (it counts as gone after three misses). */
  instanceHeartbeatMs: number;
  /** Where files the service makes (tool outputs) are kept; served under /media/. */
  mediaDir: string;
  /** The address clients reach the service at, for links to media; unset: where it listens. */
  publicUrl: string | undefined;
  toolsDir: string;
  logLevel: z.infer<typeof envSchema>['LOG_LEVEL'];
  llm: LlmConfig;
  events: EventsConfig;
  websocket: WebSocketConfig;
  /** On SIGTERM, how long replies still being written may take before they are cut off. */
  shutdownGraceMs: number;
  search: SearchConfig;
  http: HttpConfig;
  /** Agents one user may own. */
  maxAgentsPerUser: number;
  work: WorkConfig;
  limits: LimitsConfig;
  apq: ApqConfig;
  /** Bearer token `GET /metrics` requires; unset: open (the default address is loopback). */
  metricsToken: string | undefined;
}

export const defaultSearchConfig: SearchConfig = { embeddings: { kind: 'hashed-ngrams' }, maxResults: 200, efSearch: 200 };

/** `*`, or the listed origins (such as `https://app.example.com`). */
function corsOrigins(value: string): '*' | string[] {
  const origins = listed(value);
  return origins.length === 0 || origins.includes('*') ? '*' : origins;
}

/** A subscription tier as `RATE_LIMIT_<TIER>` names it: `Pro-Plus` and `PRO_PLUS` are one tier. */
export const tierName = (tier: string) => tier.toLowerCase().replace(/[^a-z0-9]/g, '_');

/** Tiers without a `RATE_LIMIT_<TIER>` of their own; others get `RATE_LIMIT_DEFAULT`. */
const defaultTierRates: Record<string, number> = { free: 300, pro: 1_200 };
const TIER_RATE = /^RATE_LIMIT_([A-Z0-9_]+)$/;
const notTiers = new Set(['WINDOW_MS', 'DEFAULT', 'ANONYMOUS']);

/** `RATE_LIMIT_<TIER>=N`, for any tier name: read apart from the fixed variables above. */
function tierRates(env: Record<string, string | undefined>): { rates: Record<string, number>; problems: string[] } {
  const rates = { ...defaultTierRates };
  const problems: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    const tier = TIER_RATE.exec(name)?.[1];
    if (!tier || notTiers.has(tier) || value === undefined) continue;
    if (!/^\d+$/.test(value)) problems.push(`${name}: must be a whole number of requests (0 for no limit)`);
    else rates[tierName(tier)] = Number(value);
  }
  return { rates, problems };
}

function trustProxy(value: string | undefined): HttpConfig['trustProxy'] {
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return true;
  return /^\d+$/.test(value) ? Number(value) : listed(value);
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const given = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== ''));
  const parsed = envSchema.safeParse(given);
  const tiers = tierRates(given);
  if (!parsed.success || tiers.problems.length) {
    const problems = [...(parsed.error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`) ?? []), ...tiers.problems].join('; ');
    throw new Error(`Invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  return {
    port: e.PORT,
    host: e.HOST,
    database: e.DATABASE_URL
      ? { kind: 'postgres', url: e.DATABASE_URL, connectTimeoutMs: e.DATABASE_CONNECT_TIMEOUT_MS }
      : { kind: 'pglite', dataDir: resolve(e.DATA_DIR) },
    redisUrl: e.REDIS_URL,
    redisKeyPrefix: e.REDIS_KEY_PREFIX,
    instanceHeartbeatMs: e.INSTANCE_HEARTBEAT_MS,
    toolsDir: resolve(e.TOOLS_DIR),
    mediaDir: resolve(e.MEDIA_DIR ?? join(e.DATA_DIR, 'media')),
    publicUrl: e.PUBLIC_URL?.replace(/\/+$/, ''),
    logLevel: e.LOG_LEVEL,
    llm: {
      baseUrl: e.LLM_BASE_URL?.replace(/\/+$/, ''),
      apiKey: e.LLM_API_KEY,
      models: {
        default: e.LLM_MODEL,
        low: e.LLM_MODEL_LOW ?? e.LLM_MODEL,
        medium: e.LLM_MODEL_MEDIUM ?? e.LLM_MODEL,
        high: e.LLM_MODEL_HIGH ?? e.LLM_MODEL,
      },
      contextTokens: e.LLM_CONTEXT_TOKENS,
      maxCompletionTokens: e.LLM_MAX_COMPLETION_TOKENS,
      firstTokenTimeoutMs: e.LLM_FIRST_TOKEN_TIMEOUT_MS,
      idleTimeoutMs: e.LLM_IDLE_TIMEOUT_MS,
      maxCallMs: e.LLM_MAX_CALL_MS,
      offlineTokenDelayMs: e.OFFLINE_TOKEN_DELAY_MS,
      checkpointMs: e.REPLY_CHECKPOINT_MS,
    },
    events: {
      replayLimit: e.EVENT_REPLAY_LIMIT,
      replayBytes: e.EVENT_REPLAY_BYTES,
      idleTtlMs: e.EVENT_IDLE_TTL_MS,
      streamBufferBytes: e.STREAM_BUFFER_BYTES,
      slowClientMs: e.SLOW_CLIENT_MS,
      heartbeatMs: e.SSE_HEARTBEAT_MS,
      accessRecheckMs: e.ACCESS_RECHECK_MS,
    },
    websocket: { maxMessageBytes: e.WS_MAX_MESSAGE_BYTES, maxOperations: e.WS_MAX_OPERATIONS, maxSocketsPerKey: e.WS_MAX_SOCKETS_PER_KEY },
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    http: {
      requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
      keepAliveTimeoutMs: e.KEEP_ALIVE_TIMEOUT_MS,
      maxConnections: e.MAX_CONNECTIONS,
      corsOrigins: corsOrigins(e.CORS_ORIGINS),
      trustProxy: trustProxy(e.TRUST_PROXY),
    },
    maxAgentsPerUser: e.MAX_AGENTS_PER_USER,
    work: {
      messagePageMaxBytes: e.MESSAGE_PAGE_MAX_BYTES,
      toolCallsPerModelCall: e.TOOL_CALLS_PER_MODEL_CALL,
      toolCallsPerReply: e.TOOL_CALLS_PER_REPLY,
      toolRunsPerUser: e.TOOL_RUNS_PER_USER,
      toolRunsPerProcess: e.TOOL_RUNS_PER_PROCESS,
      imageWorkers: e.IMAGE_WORKERS,
      graphqlInFlightPerKey: e.GRAPHQL_IN_FLIGHT_PER_KEY,
      reactionsPerUserMessage: e.REACTIONS_PER_USER_MESSAGE,
    },
    limits: {
      rate: { windowMs: e.RATE_LIMIT_WINDOW_MS, perTier: tiers.rates, default: e.RATE_LIMIT_DEFAULT, anonymous: e.RATE_LIMIT_ANONYMOUS },
      maxSubscriptionsPerKey: e.MAX_SUBSCRIPTIONS_PER_KEY,
      maxStreamsPerKey: e.MAX_STREAMS_PER_KEY,
      slotTtlMs: e.LIMIT_SLOT_TTL_MS,
    },
    apq: { maxEntries: e.APQ_MAX_ENTRIES, ttlMs: e.APQ_TTL_MS },
    metricsToken: e.METRICS_TOKEN,
    search: {
      embeddings: e.EMBEDDINGS_URL
        ? {
            kind: 'http',
            url: e.EMBEDDINGS_URL,
            model: e.EMBEDDINGS_MODEL!,
            apiKey: e.EMBEDDINGS_API_KEY,
            batchSize: e.EMBEDDINGS_BATCH_SIZE,
            timeoutMs: e.EMBEDDINGS_TIMEOUT_MS,
            retries: e.EMBEDDINGS_RETRIES,
          }
        : { kind: 'hashed-ngrams' },
      minScore: e.SEARCH_MIN_SCORE,
      maxResults: e.SEARCH_MAX_RESULTS,
      efSearch: e.SEARCH_EF_SEARCH,
    },
  };
}
