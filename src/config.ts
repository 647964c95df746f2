import { join, resolve } from 'node:path';
import { z } from 'zod';
import { derive, family, type Shape, read, refuse, setting } from './settings.ts';

/**
 * Every setting, declared once in `settings` below: its variable, how it is read, its default and
 * what it means, at the place in `Config` its value goes. `Config`, `parley serve --help` and the
 * table in docs/configuration.md all come from that tree. A new setting is one more
 * `setting(...)` at its place; `npx tsx scripts/configuration-table.ts` then rewrites the table
 * (test/config.test.ts fails until it does).
 */

const positiveInt = z.coerce.number().int().positive();
const wholeNumber = z.coerce.number().int().min(0);
const flag = z.enum(['true', 'false']).transform((v) => v === 'true');
const secondsList = z
  .string()
  .transform((v) => v.split(',').map((x) => Number(x.trim())))
  .pipe(z.array(z.number().int().min(1)).min(1).max(20));
const httpUrl = (error: string) => z.url({ protocol: /^https?$/, error });
/** A URL whose server is reached with fetch, which refuses a user and password in the URL: they would only end up in messages. */
const httpUrlWithoutPassword = (error: string) =>
  httpUrl(error).refine((v) => {
    const { username, password } = new URL(v);
    return !username && !password;
  }, 'must not hold a user name or password');
/** A URL of `schemes` that parses as one (a password that is not escaped may break it); the message never repeats it. */
const serverUrl = (schemes: RegExp, schemeProblem: string, example: string) =>
  z
    .string()
    .regex(schemes, { error: schemeProblem, abort: true })
    .refine((v) => URL.canParse(v), `is not a URL (escape any of : / @ ? # in the password as %XX): write it as ${example}`);
const listed = (value: string) =>
  value
    .split(',')
    .map((o) => o.trim().replace(/\/+$/, ''))
    .filter(Boolean);
const isOrigin = (value: string) => URL.canParse(value) && new URL(value).origin === value;
const withoutTrailingSlash = (url: string | undefined) => url?.replace(/\/+$/, '');

export type DatabaseConfig =
  /** `connectTimeoutMs`: how long opening a connection may take before the request fails (503). */
  | { kind: 'postgres'; url: string; connectTimeoutMs?: number }
  /** `dataDir` undefined means an in-memory database (tests). */
  | { kind: 'pglite'; dataDir: string | undefined };

/**
 * Where the key that seals deployments' secrets comes from: `key` (and `previous` keys, for
 * opening only) from settings, else a key generated once into `keyFile` (the embedded
 * database's data directory). `shared`: several instances share the database (PostgreSQL), so
 * a key of one instance's own would not open what another sealed: `SECRETS_KEY` is required.
 */
export interface SecretsConfig {
  key: Buffer | undefined;
  previous: Buffer[];
  keyFile: string | undefined;
  shared: boolean;
}

/** A 256-bit key as settings give it: base64 (or base64url) of 32 bytes. */
const isKey = (value: string) => /^[A-Za-z0-9+/_-]{43}=?$/.test(value.trim()) && Buffer.from(value.trim(), 'base64').length === 32;
const KEY_PROBLEM = 'must be 32 random bytes in base64 (openssl rand -base64 32)';

export type EmbeddingsConfig =
  | { kind: 'hashed-ngrams' }
  | { kind: 'http'; url: string; model: string; apiKey?: string; batchSize: number; timeoutMs: number; retries: number };

/** A subscription tier as `RATE_LIMIT_<TIER>` names it: `Pro-Plus` and `PRO_PLUS` are one tier. */
export const tierName = (tier: string) => tier.toLowerCase().replace(/[^a-z0-9]/g, '_');

/** `*`, or the listed origins (such as `https://app.example.com`). */
function corsOrigins(value: string): '*' | string[] {
  const origins = listed(value);
  return origins.length === 0 || origins.includes('*') ? '*' : origins;
}

/** Fastify's `trustProxy`. */
function trustProxy(value: string | undefined): boolean | number | string[] {
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return true;
  return /^\d+$/.test(value) ? Number(value) : listed(value);
}

const dataDir = setting('DATA_DIR', z.string().min(1), {
  default: './data',
  meaning: "where the embedded PGlite keeps its files (`pgdata/`), its lock and the CLI's socket",
});
const databaseUrl = setting(
  'DATABASE_URL',
  serverUrl(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://', 'postgres://user:password@host:5432/database'),
  {
    meaning: '`postgres://...`: use a PostgreSQL server instead of the embedded PGlite',
  },
);
const connectTimeout = setting('DATABASE_CONNECT_TIMEOUT_MS', positiveInt, {
  default: 5_000,
  meaning: 'with `DATABASE_URL`: how long opening a connection may take before the request fails with 503',
});
const mediaDir = setting('MEDIA_DIR', z.string().min(1), {
  unset: '`DATA_DIR/media`',
  meaning: 'where files made by tools are kept, served under `/media/`',
});

const model = setting('LLM_MODEL', z.string().min(1), {
  default: 'gpt-4o-mini',
  meaning: 'the model, and the one for each `model_profile` not set below',
});
const profileModel = <N extends string>(name: N, profile: string) =>
  setting(name, z.string().min(1), {
    unset: '`LLM_MODEL`',
    meaning: `the model for agents whose \`llm_settings.model_profile\` is \`${profile}\``,
  });
const lowModel = profileModel('LLM_MODEL_LOW', 'low');
const mediumModel = profileModel('LLM_MODEL_MEDIUM', 'medium');
const highModel = profileModel('LLM_MODEL_HIGH', 'high');

const embeddingSettings = {
  url: setting('EMBEDDINGS_URL', httpUrlWithoutPassword('must be an http(s) URL such as http://127.0.0.1:7997/v1'), {
    meaning:
      'base URL of an OpenAI-compatible embeddings API (e.g. `http://127.0.0.1:7997/v1`, a CLIP ViT-L/14 server); unset: built-in offline embeddings (not CLIP)',
  }),
  model: setting('EMBEDDINGS_MODEL', z.string().min(1), {
    meaning: 'model name sent to that server (required with `EMBEDDINGS_URL`); it names the vector space',
  }),
  apiKey: setting('EMBEDDINGS_API_KEY', z.string().min(1), { meaning: 'sent to the embeddings server as `Authorization: Bearer ...`' }),
  batchSize: setting('EMBEDDINGS_BATCH_SIZE', z.coerce.number().int().min(1).max(2048), {
    default: 32,
    meaning: 'texts per embeddings request',
  }),
  timeoutMs: setting('EMBEDDINGS_TIMEOUT_MS', z.coerce.number().int().min(1), {
    default: 30_000,
    meaning: 'time per embeddings request attempt',
  }),
  retries: setting('EMBEDDINGS_RETRIES', z.coerce.number().int().min(0).max(10), {
    default: 3,
    meaning: 'retries of an embeddings request that failed for a transient reason',
  }),
};

const secretsKey = setting('SECRETS_KEY', z.string().refine(isKey, KEY_PROBLEM), {
  unset: 'a key generated into `DATA_DIR/secrets.key` (embedded database only)',
  meaning:
    "the key deployments' secrets (bot tokens) are sealed with (AES-256-GCM): 32 random bytes in base64; required with `DATABASE_URL`, the same on every instance (`docs/security.md`)",
});
const previousSecretsKeys = setting(
  'SECRETS_PREVIOUS_KEYS',
  z.string().refine((v) => listed(v).every(isKey), `must be a comma-separated list of keys that each ${KEY_PROBLEM}`),
  { meaning: 'keys secrets were sealed with before `SECRETS_KEY`, for opening only while `parley secrets reseal` moves them over' },
);

export const settings = {
  port: setting('PORT', z.coerce.number().int().min(0).max(65535), { default: 4000, meaning: 'the port to listen on' }),
  host: setting('HOST', z.string().min(1), { default: '127.0.0.1', meaning: 'the address to listen on' }),
  logLevel: setting('LOG_LEVEL', z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), {
    default: 'info',
    meaning: '`fatal`, `error`, `warn`, `info`, `debug`, `trace`, or `silent`',
  }),
  database: derive(
    [databaseUrl, dataDir, connectTimeout],
    (v): DatabaseConfig =>
      v.DATABASE_URL
        ? { kind: 'postgres', url: v.DATABASE_URL, connectTimeoutMs: v.DATABASE_CONNECT_TIMEOUT_MS }
        : { kind: 'pglite', dataDir: resolve(v.DATA_DIR) },
  ),
  mediaDir: derive([mediaDir, dataDir], (v) => resolve(v.MEDIA_DIR ?? join(v.DATA_DIR, 'media'))),
  publicUrl: derive(
    [
      setting('PUBLIC_URL', httpUrlWithoutPassword('must be an http(s) URL'), {
        unset: 'where it listens',
        meaning: 'the address clients reach the service at, for links to media (behind a proxy)',
      }),
    ],
    (v) => withoutTrailingSlash(v.PUBLIC_URL),
  ),
  toolsDir: derive(
    [
      setting('TOOLS_DIR', z.string().min(1), {
        default: './tools',
        meaning: 'the tool registry (one YAML file per tool, validated at start)',
      }),
    ],
    (v) => resolve(v.TOOLS_DIR),
  ),
  redisUrl: setting('REDIS_URL', serverUrl(/^rediss?:\/\//, 'must start with redis:// or rediss://', 'redis://:password@host:6379'), {
    meaning:
      '`redis://...`: several instances share live events (replay included), cancels, key revocations, rate counts, open-stream slots and persisted queries through this Redis; unset: one instance, all in process (`docs/instances.md`)',
  }),
  redisKeyPrefix: setting(
    'REDIS_KEY_PREFIX',
    z
      .string()
      .max(64)
      .regex(/^[\w:.{}-]*$/, 'may hold letters, digits and _ : . - { } only'),
    { default: '', meaning: 'put before every Redis key, so separate deployments can share one Redis' },
  ),
  instanceHeartbeatMs: setting('INSTANCE_HEARTBEAT_MS', z.coerce.number().int().min(100), {
    default: 5_000,
    meaning:
      'with `REDIS_URL`: how often an instance says it is alive; one silent for three beats is gone, and the others close the replies it was writing',
  }),
  shutdownGraceMs: setting('SHUTDOWN_GRACE_MS', wholeNumber, {
    default: 10_000,
    meaning: 'on SIGTERM, how long replies being written may take to finish',
  }),
  jobs: {
    pollMs: setting('JOBS_POLL_MS', z.coerce.number().int().min(500), {
      default: 1_000,
      meaning: 'how often each worker of the job queue looks for a job that is due (one indexed query; the lateness of a due job)',
    }),
    superviseS: setting('JOBS_SUPERVISE_S', z.coerce.number().int().min(1).max(3_600), {
      default: 5,
      meaning: 'how often the job queue looks for jobs whose instance stopped saying it is alive, and tidies finished ones',
    }),
    takeoverS: setting('JOBS_TAKEOVER_S', z.coerce.number().int().min(10).max(3_600), {
      default: 10,
      meaning:
        'a running job whose instance has not said it is alive for this long is tried again elsewhere (every `takeoverS / 2` while it runs; 10 at least)',
    }),
    poolSize: setting('JOBS_POOL_SIZE', z.coerce.number().int().min(1).max(100), {
      default: 3,
      meaning: "with `DATABASE_URL`: the job queue's own PostgreSQL connections, beside Prisma's",
    }),
  },
  http: {
    requestTimeoutMs: setting('REQUEST_TIMEOUT_MS', positiveInt, {
      default: 30_000,
      meaning: 'a whole request (headers and body) must arrive within this; slower ones get 408 and are closed',
    }),
    keepAliveTimeoutMs: setting('KEEP_ALIVE_TIMEOUT_MS', positiveInt, {
      default: 5_000,
      meaning: 'idle keep-alive connections close after this (behind a proxy: above its idle timeout)',
    }),
    maxConnections: setting('MAX_CONNECTIONS', positiveInt, {
      unset: 'open-file limit less a fifth',
      meaning: 'open connections (WebSockets included) past which new ones are refused',
    }),
    corsOrigins: derive(
      [
        setting(
          'CORS_ORIGINS',
          z
            .string()
            .refine(
              (v) => listed(v).every((o) => o === '*' || isOrigin(o)),
              'must be * or a comma-separated list of origins such as https://app.example.com',
            ),
          { default: '*', meaning: 'origins browsers may call from: `*` or a comma-separated list (never with credentials)' },
        ),
      ],
      (v) => corsOrigins(v.CORS_ORIGINS),
    ),
    trustProxy: derive(
      [
        setting(
          'TRUST_PROXY',
          z
            .string()
            .refine(
              (v) => /^(true|false|\d+)$/.test(v) || listed(v).every((a) => /^[\d.:a-fA-F/]+$/.test(a)),
              'must be true, false, a number of hops, or a comma-separated list of proxy addresses',
            ),
          {
            meaning:
              '`true`, a number of hops or proxy addresses: whose `X-Forwarded-For` names the client (per-address limits behind a proxy)',
          },
        ),
      ],
      (v) => trustProxy(v.TRUST_PROXY),
    ),
  },
  llm: {
    baseUrl: derive(
      [
        setting('LLM_BASE_URL', httpUrl('must be an http(s) URL'), {
          meaning: 'an OpenAI-compatible chat-completions API (e.g. `https://api.openai.com/v1`); unset: the offline responder',
        }),
      ],
      (v) => withoutTrailingSlash(v.LLM_BASE_URL),
    ),
    apiKey: setting('LLM_API_KEY', z.string(), { meaning: 'sent to the model provider as `Authorization: Bearer ...`' }),
    models: derive([model, lowModel, mediumModel, highModel], (v) => ({
      default: v.LLM_MODEL,
      low: v.LLM_MODEL_LOW ?? v.LLM_MODEL,
      medium: v.LLM_MODEL_MEDIUM ?? v.LLM_MODEL,
      high: v.LLM_MODEL_HIGH ?? v.LLM_MODEL,
    })),
    contextTokens: setting('LLM_CONTEXT_TOKENS', positiveInt, {
      default: 16_000,
      meaning: 'the context window the conversation is trimmed to',
    }),
    maxCompletionTokens: setting('LLM_MAX_COMPLETION_TOKENS', positiveInt, {
      default: 1_024,
      meaning: 'room kept in that window for the answer, and the most chunks one model call may stream',
    }),
    firstTokenTimeoutMs: setting('LLM_FIRST_TOKEN_TIMEOUT_MS', positiveInt, {
      default: 60_000,
      meaning: "wait for a reply's first chunk (until then a failed call is retried once)",
    }),
    idleTimeoutMs: setting('LLM_IDLE_TIMEOUT_MS', positiveInt, {
      default: 30_000,
      meaning: 'longest silence between two chunks once a reply is streaming',
    }),
    maxCallMs: setting('LLM_MAX_CALL_MS', positiveInt, {
      default: 300_000,
      meaning:
        'longest one model call may stream, however steadily; a reply past it, or past `LLM_MAX_COMPLETION_TOKENS` chunks, ends failed with the reason (`docs/faults.md`)',
    }),
    offlineTokenDelayMs: setting('OFFLINE_TOKEN_DELAY_MS', wholeNumber, {
      default: 25,
      meaning: "pause between the offline responder's tokens, so it streams like a model would",
    }),
    checkpointMs: setting('REPLY_CHECKPOINT_MS', wholeNumber, {
      default: 2_000,
      meaning: "how often a streaming reply's text so far is saved (what a crash can lose of it); `0`: only when it ends",
    }),
  },
  events: {
    replayLimit: setting('EVENT_REPLAY_LIMIT', positiveInt, {
      default: 5_000,
      meaning: "events kept per session (and per user's feed) for clients that resume (`after`, `Last-Event-ID`)",
    }),
    replayBytes: setting('EVENT_REPLAY_BYTES', positiveInt, {
      default: 16 * 1024 * 1024,
      meaning:
        "bytes of events a session's (or user's feed's) replay log keeps, besides `EVENT_REPLAY_LIMIT`; the oldest go first past either",
    }),
    idleTtlMs: setting('EVENT_IDLE_TTL_MS', positiveInt, {
      default: 600_000,
      meaning: "a session (or user's feed) with no watcher and no event for this long forgets its replay log",
    }),
    streamBufferBytes: setting('STREAM_BUFFER_BYTES', positiveInt, {
      default: 1024 * 1024,
      meaning: 'output an event stream or WebSocket may have waiting for its client; past it, writing waits for the client',
    }),
    slowClientMs: setting('SLOW_CLIENT_MS', positiveInt, {
      default: 30_000,
      meaning: 'how long a client may leave that output unread before it is cut off as too slow',
    }),
    heartbeatMs: setting('SSE_HEARTBEAT_MS', positiveInt, { default: 15_000, meaning: 'keep-alive comments on event streams' }),
    accessRecheckMs: setting('ACCESS_RECHECK_MS', positiveInt, {
      default: 2_000,
      meaning:
        "an open watch delivers only while its viewer's session membership and API key were confirmed within this (all open watches are re-checked together); bounds how long a lost revocation signal can go unnoticed",
    }),
  },
  websocket: {
    maxMessageBytes: setting('WS_MAX_MESSAGE_BYTES', positiveInt, {
      default: 1024 * 1024,
      meaning: 'largest graphql-ws message; a larger one closes the socket (1009)',
    }),
    maxOperations: setting('WS_MAX_OPERATIONS', positiveInt, {
      default: 100,
      meaning: 'queries, mutations and subscriptions under way on one socket (`docs/security.md`)',
    }),
    maxSocketsPerKey: setting('WS_MAX_SOCKETS_PER_KEY', positiveInt, {
      default: 20,
      meaning: 'graphql-ws sockets one API key may hold open',
    }),
  },
  mcp: {
    maxSessionsPerKey: setting('MCP_MAX_SESSIONS_PER_KEY', positiveInt, {
      default: 10,
      meaning: 'MCP sessions (`/mcp`, `docs/mcp.md`) one API key may hold open on one instance',
    }),
    sessionIdleS: setting('MCP_SESSION_IDLE_S', positiveInt, {
      default: 1800,
      meaning: 'seconds an MCP session lives without a request before it is closed',
    }),
    serversPerUser: setting('MCP_SERVERS_PER_USER', positiveInt, {
      default: 20,
      meaning: "MCP servers one user may register for their agents' tools (`docs/mcp.md`)",
    }),
    timeoutMs: setting('MCP_TIMEOUT_MS', positiveInt, {
      default: 30_000,
      meaning: "a request to a user's MCP server (connecting, listing its tools, a call) with no answer within this fails, with the reason",
    }),
    offerWaitMs: setting('MCP_OFFER_WAIT_MS', positiveInt, {
      default: 5_000,
      meaning:
        "how long a reply waits for a user's MCP server's list of tools before it starts without them (the list is still taken, for the next reply)",
    }),
    toolsTtlS: setting('MCP_TOOLS_TTL_S', positiveInt, {
      default: 300,
      meaning: "seconds a user's MCP server's list of tools is kept; it is replaced sooner when the server says it changed",
    }),
    maxAnswerBytes: setting('MCP_MAX_ANSWER_BYTES', positiveInt, {
      default: 4 * 1024 * 1024,
      meaning: "bytes one answer of a user's MCP server may hold (its event stream: over its life); past it the request fails",
    }),
    clientIdleS: setting('MCP_CLIENT_IDLE_S', positiveInt, {
      default: 300,
      meaning: "seconds a connection to a user's MCP server stays open unused before it is closed",
    }),
  },
  limits: {
    rate: {
      windowMs: setting('RATE_LIMIT_WINDOW_MS', positiveInt, { default: 60_000, meaning: 'the window requests are counted in' }),
      perTier: family({
        name: 'RATE_LIMIT_<TIER>',
        pattern: /^RATE_LIMIT_([A-Z0-9_]+)$/,
        key: tierName,
        read: (value) => (/^\d+$/.test(value) ? Number(value) : undefined),
        problem: 'must be a whole number of requests (0 for no limit)',
        defaults: { free: 300, pro: 1_200 },
        meaning:
          'requests per window per API key whose user has that `subscriptionTier` (any tier name; `0`: no limit); over it, `429` with `Retry-After`',
      }),
      default: setting('RATE_LIMIT_DEFAULT', wholeNumber, {
        default: 300,
        meaning: 'requests per window per API key for tiers without a `RATE_LIMIT_<TIER>` of their own (`0`: no limit)',
      }),
      anonymous: setting('RATE_LIMIT_ANONYMOUS', wholeNumber, {
        default: 120,
        meaning: 'requests per window per client address, for requests without a valid key (`0`: no limit)',
      }),
    },
    maxSubscriptionsPerKey: setting('MAX_SUBSCRIPTIONS_PER_KEY', positiveInt, {
      default: 100,
      meaning: 'subscriptions and event streams one API key holds open, all transports together',
    }),
    maxStreamsPerKey: setting('MAX_STREAMS_PER_KEY', positiveInt, {
      default: 10,
      meaning: 'replies streamed to one API key at once (`stream: true`, `Subscription.sendMessage`)',
    }),
    slotTtlMs: setting('LIMIT_SLOT_TTL_MS', z.coerce.number().int().min(1_000), {
      default: 30_000,
      meaning: 'with Redis: how long the slots of an instance that died keep counting',
    }),
  },
  maxAgentsPerUser: setting('MAX_AGENTS_PER_USER', positiveInt, { default: 100, meaning: 'agents one user may own' }),
  triggers: {
    minIntervalS: setting('TRIGGER_MIN_INTERVAL_S', positiveInt, {
      default: 60,
      meaning: 'the shortest time between two scheduled runs of a trigger, in seconds (a schedule that runs more often is refused)',
    }),
    perUser: setting('TRIGGERS_PER_USER', positiveInt, { default: 100, meaning: 'triggers one user may have, over all their agents' }),
    lateGraceS: setting('TRIGGER_LATE_GRACE_S', wholeNumber, {
      default: 60,
      meaning:
        'an occurrence due less than this many seconds ago is late, not missed: it still runs; older ones missed in an outage fold into one catch-up run',
    }),
    runTimeoutS: setting('TRIGGER_RUN_TIMEOUT_S', positiveInt, {
      default: 900,
      meaning: 'a trigger run whose reply has not ended after this many seconds is stopped, failed and released',
    }),
  },
  outbound: {
    allowHttp: setting('OUTBOUND_ALLOW_HTTP', flag, {
      default: false,
      meaning:
        'addresses the service is given to call (webhooks, tool services: docs/outbound.md) may be http:// as well as https:// (tests, private networks)',
    }),
    allowPrivate: setting('OUTBOUND_ALLOW_PRIVATE', flag, {
      default: false,
      meaning:
        'addresses the service is given to call (webhooks, tool services) may resolve to loopback, private, link-local or metadata addresses (tests, private networks); refused otherwise, when given and again on each call',
    }),
  },
  webhooks: {
    perUser: setting('WEBHOOKS_PER_USER', positiveInt, { default: 20, meaning: 'webhook endpoints one user may have' }),
    timeoutMs: setting('WEBHOOK_TIMEOUT_MS', positiveInt, {
      default: 10_000,
      meaning: 'a delivery whose receiver has not answered (headers and the first 4 KB read) within this fails, and is tried again later',
    }),
    retryDelaysS: setting('WEBHOOK_RETRY_DELAYS_S', secondsList, {
      default: [5, 300, 1_800, 7_200, 18_000, 36_000, 50_400],
      meaning:
        'seconds before each try again of a delivery that failed, in order (comma-separated); after the last one fails the delivery is given up',
    }),
    disableAfterS: setting('WEBHOOK_DISABLE_AFTER_S', positiveInt, {
      default: 5 * 86_400,
      meaning: 'an endpoint whose deliveries have all failed for this many seconds is turned off, and says why',
    }),
    inFlightPerEndpoint: setting('WEBHOOK_IN_FLIGHT', positiveInt, {
      default: 4,
      meaning: 'deliveries one instance has under way to one endpoint at once; the others wait their turn',
    }),
    sweepMs: setting('WEBHOOK_SWEEP_MS', z.coerce.number().int().min(50), {
      default: 10_000,
      meaning:
        'the safety net: how often each instance looks for deliveries due that nothing handed to the job queue (the instance that records an event hands its deliveries over once it commits; one that died first leaves them to this look)',
    }),
  },
  collections: {
    maxPerUser: setting('MAX_COLLECTIONS_PER_USER', positiveInt, { default: 100, meaning: 'collections one user may own' }),
    maxCreations: setting('COLLECTION_MAX_CREATIONS', positiveInt, {
      default: 1_000,
      meaning: 'creations one collection may hold (a request adds or removes at most 100)',
    }),
    pageMaxBytes: setting('COLLECTION_PAGE_MAX_BYTES', positiveInt, {
      default: 1024 * 1024,
      meaning: "a page of a collection's creations, or of the collections list, stops before about this many bytes (it holds at least one)",
    }),
  },
  work: {
    messagePageMaxBytes: setting('MESSAGE_PAGE_MAX_BYTES', positiveInt, {
      default: 1024 * 1024,
      meaning: 'a page of messages stops before this many bytes of text (it holds at least one message; `docs/security.md`)',
    }),
    listPageMaxBytes: setting('LIST_PAGE_MAX_BYTES', positiveInt, {
      default: 1024 * 1024,
      meaning:
        "a numbered page of models, tasks, threads or sessions (`GET /v2/models`, `/v2/tasks`, `/v2/threads`, `/v2/sessions`), and a page of GraphQL's `tasks`, stops before about this many bytes (it holds at least one; the next page goes on from there; `docs/compatibility.md`)",
    }),
    toolCallsPerModelCall: setting('TOOL_CALLS_PER_MODEL_CALL', positiveInt, {
      default: 8,
      meaning: 'tool calls one model call may run; the model is told the rest were not run, and they cost nothing',
    }),
    toolCallsPerReply: setting('TOOL_CALLS_PER_REPLY', positiveInt, {
      default: 24,
      meaning: 'tool calls one reply may run over all its model calls; the rest fail with the reason, uncharged',
    }),
    toolRunsPerUser: setting('TOOL_RUNS_PER_USER', positiveInt, {
      default: 4,
      meaning: 'tool calls executing at once for one paying user; more wait their turn',
    }),
    toolRunsPerProcess: setting('TOOL_RUNS_PER_PROCESS', positiveInt, {
      default: 8,
      meaning: 'tool calls executing at once in this process; more wait their turn',
    }),
    tasksPerUser: setting('TASKS_PER_USER', positiveInt, {
      default: 100,
      meaning: 'tasks (`POST /v2/tasks/create`) one user may have pending or running at once; more are refused with 429',
    }),
    imageWorkers: setting('IMAGE_WORKERS', positiveInt, { default: 2, meaning: 'worker threads painting images off the event loop' }),
    graphqlInFlightPerKey: setting('GRAPHQL_IN_FLIGHT_PER_KEY', positiveInt, {
      default: 16,
      meaning: 'GraphQL queries and mutations one API key may have executing at once (HTTP and WebSockets); more get `TOO_MANY_IN_FLIGHT`',
    }),
    reactionsPerUserMessage: setting('REACTIONS_PER_USER_MESSAGE', positiveInt, {
      default: 10,
      meaning: 'reactions one user may have on one message',
    }),
  },
  secrets: derive(
    [secretsKey, previousSecretsKeys, databaseUrl, dataDir],
    (v): SecretsConfig => ({
      key: v.SECRETS_KEY ? Buffer.from(v.SECRETS_KEY.trim(), 'base64') : undefined,
      previous: listed(v.SECRETS_PREVIOUS_KEYS ?? '').map((k) => Buffer.from(k, 'base64')),
      keyFile: v.DATABASE_URL ? undefined : join(resolve(v.DATA_DIR), 'secrets.key'),
      shared: Boolean(v.DATABASE_URL),
    }),
  ),
  deployments: {
    leaseMs: setting('DEPLOYMENT_LEASE_MS', z.coerce.number().int().min(500), {
      default: 10_000,
      meaning:
        "how long the instance reading a running deployment's updates holds it without renewing (renewed every third of it); another instance takes it over this long after the holder dies",
    }),
    chatMessagesPerMinute: setting('DEPLOYMENT_CHAT_RATE', positiveInt, {
      default: 10,
      meaning: "messages a deployed agent answers per chat per minute, unless the deployment's `config` sets its own",
    }),
    dailyMannaCap: setting('DEPLOYMENT_DAILY_MANNA_CAP', wholeNumber, {
      default: 100,
      meaning:
        "manna a deployment's chats may spend per UTC day, unless its `config` sets its own; past it, chats are told and not answered",
    }),
    telegram: {
      apiUrl: derive(
        [
          setting('TELEGRAM_API_URL', httpUrlWithoutPassword('must be an http(s) URL'), {
            default: 'https://api.telegram.org',
            meaning: "where Telegram's Bot API is reached (a test or a local Bot API server elsewhere)",
          }),
        ],
        (v) => withoutTrailingSlash(v.TELEGRAM_API_URL)!,
      ),
      pollTimeoutS: setting('TELEGRAM_POLL_TIMEOUT_S', z.coerce.number().int().min(0).max(50), {
        default: 25,
        meaning: 'how long one `getUpdates` long poll waits for messages, in seconds',
      }),
    },
  },
  apq: {
    maxEntries: setting('APQ_MAX_ENTRIES', positiveInt, {
      default: 1_000,
      meaning: 'automatic persisted queries kept; the least recently used go first',
    }),
    ttlMs: setting('APQ_TTL_MS', positiveInt, { default: 24 * 60 * 60 * 1000, meaning: 'how long a persisted query is kept unused' }),
  },
  metricsToken: setting('METRICS_TOKEN', z.string().min(16, 'must be at least 16 characters'), {
    meaning: 'when set (16+ characters), `GET /metrics` needs `Authorization: Bearer <token>`; unset, it is open (fine on loopback)',
  }),
  search: {
    embeddings: derive(Object.values(embeddingSettings), (v): EmbeddingsConfig => {
      if (!v.EMBEDDINGS_URL) return { kind: 'hashed-ngrams' };
      if (!v.EMBEDDINGS_MODEL) refuse('EMBEDDINGS_MODEL', 'is required with EMBEDDINGS_URL');
      return {
        kind: 'http',
        url: v.EMBEDDINGS_URL,
        model: v.EMBEDDINGS_MODEL,
        apiKey: v.EMBEDDINGS_API_KEY,
        batchSize: v.EMBEDDINGS_BATCH_SIZE,
        timeoutMs: v.EMBEDDINGS_TIMEOUT_MS,
        retries: v.EMBEDDINGS_RETRIES,
      };
    }),
    minScore: setting('SEARCH_MIN_SCORE', z.coerce.number().min(-1).max(1), {
      unset: "provider's (0.15 built-in, 0.2 HTTP)",
      meaning: 'cosine similarity a creation needs to match a query',
    }),
    maxResults: setting('SEARCH_MAX_RESULTS', z.coerce.number().int().min(1).max(10_000), {
      default: 200,
      meaning: 'at most this many nearest creations are ranked per query (the window `total` counts within)',
    }),
    efSearch: setting('SEARCH_EF_SEARCH', z.coerce.number().int().min(1).max(1000), {
      default: 200,
      meaning: "pgvector's `hnsw.ef_search` for search queries (pgvector's own default is 40)",
    }),
  },
};

export type Config = Shape<typeof settings>;
export type LlmConfig = Config['llm'];
export type EventsConfig = Config['events'];
export type WebSocketConfig = Config['websocket'];
export type McpConfig = Config['mcp'];
export type HttpConfig = Config['http'];
/** What one API key (or, without one, one IP address) may do; 0 in a rate means no limit. */
export type LimitsConfig = Config['limits'];
/** How much work one request, prompt or user may cause (see docs/security.md). */
export type WorkConfig = Config['work'];
/** When triggers may run and how many a user may have (docs/triggers.md). */
export type TriggersConfig = Config['triggers'];
/** Automatic persisted queries: the hash-to-query store, bounded. */
export type ApqConfig = Config['apq'];
export type SearchConfig = Config['search'];
/** How large collections and their pages may grow. */
export type CollectionsConfig = Config['collections'];
/** Running deployments: the lease, their chats' bounds, the platforms' addresses. */
export type DeploymentsConfig = Config['deployments'];
/** Webhooks: their bounds, timeout and retries (`docs/webhooks.md`). */
export type WebhooksConfig = Config['webhooks'];
/** Which addresses users give may be called (`docs/webhooks.md`). */
export type OutboundConfig = Config['outbound'];
/** The job queue's polling, supervision and connections (`docs/jobs.md`). */
export type JobsConfig = Config['jobs'];

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const result = read(settings, env);
  if ('problems' in result) throw new Error(`Invalid configuration: ${result.problems.join('; ')}`);
  return result.value;
}

export const defaultSearchConfig: SearchConfig = loadConfig({}).search;
