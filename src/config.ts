import { join, resolve } from 'node:path';
import { z } from 'zod';

const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);
const listed = (value: string) => value.split(',').map((o) => o.trim().replace(/\/+$/, '')).filter(Boolean);
const isOrigin = (value: string) => URL.canParse(value) && new URL(value).origin === value;

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(4000),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://').optional(),
  DATA_DIR: z.string().min(1).default('./data'),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, 'must start with redis:// or rediss://').optional(),
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
  OFFLINE_TOKEN_DELAY_MS: z.coerce.number().int().min(0).default(25),

  EVENT_REPLAY_LIMIT: positiveInt(5_000),
  EVENT_IDLE_TTL_MS: positiveInt(600_000),
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
    .refine((v) => listed(v).every((o) => o === '*' || isOrigin(o)), 'must be * or a comma-separated list of origins such as https://app.example.com'),
  MAX_AGENTS_PER_USER: positiveInt(100),
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
}).refine((e) => !e.EMBEDDINGS_URL || e.EMBEDDINGS_MODEL, { path: ['EMBEDDINGS_MODEL'], message: 'is required with EMBEDDINGS_URL' });

export type DatabaseConfig =
  | { kind: 'postgres'; url: string }
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
  /** Pause between the offline responder's tokens, so it streams like a model would. */
  offlineTokenDelayMs: number;
}

export interface EventsConfig {
  /** Events kept per session for clients that resume with `after` / Last-Event-ID. */
  replayLimit: number;
  /** A session with no watcher and no event for this long forgets its replay log. */
  idleTtlMs: number;
  /** Output an SSE stream may have waiting for a client; past it, writing waits for the client. */
  streamBufferBytes: number;
  /** A client that leaves its stream or WebSocket output unread this long is cut off as too slow. */
  slowClientMs: number;
  heartbeatMs: number;
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
  /** Bearer token `GET /metrics` requires; unset: open (the default address is loopback). */
  metricsToken: string | undefined;
}

export const defaultSearchConfig: SearchConfig = { embeddings: { kind: 'hashed-ngrams' }, maxResults: 200, efSearch: 200 };

/** `*`, or the listed origins (such as `https://app.example.com`). */
function corsOrigins(value: string): '*' | string[] {
  const origins = listed(value);
  return origins.length === 0 || origins.includes('*') ? '*' : origins;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`Invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  return {
    port: e.PORT,
    host: e.HOST,
    database: e.DATABASE_URL ? { kind: 'postgres', url: e.DATABASE_URL } : { kind: 'pglite', dataDir: resolve(e.DATA_DIR) },
    redisUrl: e.REDIS_URL,
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
      offlineTokenDelayMs: e.OFFLINE_TOKEN_DELAY_MS,
    },
    events: {
      replayLimit: e.EVENT_REPLAY_LIMIT,
      idleTtlMs: e.EVENT_IDLE_TTL_MS,
      streamBufferBytes: e.STREAM_BUFFER_BYTES,
      slowClientMs: e.SLOW_CLIENT_MS,
      heartbeatMs: e.SSE_HEARTBEAT_MS,
    },
    websocket: { maxMessageBytes: e.WS_MAX_MESSAGE_BYTES, maxOperations: e.WS_MAX_OPERATIONS, maxSocketsPerKey: e.WS_MAX_SOCKETS_PER_KEY },
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    http: {
      requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
      keepAliveTimeoutMs: e.KEEP_ALIVE_TIMEOUT_MS,
      maxConnections: e.MAX_CONNECTIONS,
      corsOrigins: corsOrigins(e.CORS_ORIGINS),
    },
    maxAgentsPerUser: e.MAX_AGENTS_PER_USER,
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
