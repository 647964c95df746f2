import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { buildApp, type App } from '../../src/app.ts';
import {
  loadConfig,
  type ApqConfig,
  type CollectionsConfig,
  type Config,
  type DatabaseConfig,
  type DeploymentsConfig,
  type EventsConfig,
  type HttpConfig,
  type JobsConfig,
  type OutboundConfig,
  type WebhooksConfig,
  type LimitsConfig,
  type LlmConfig,
  type SearchConfig,
  type SecretsConfig,
  type TriggersConfig,
  type WebSocketConfig,
  type McpConfig,
  type WorkConfig,
} from '../../src/config.ts';
import { freshDatabase } from './database.ts';

export const toolsDir = fileURLToPath(new URL('../../tools', import.meta.url));

export interface TestUser {
  id: string;
  username: string;
  apiKey: string;
}

export interface RestResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface GraphQLResponse<T> {
  status: number;
  data: T | null | undefined;
  errors?: { message: string; path?: (string | number)[]; extensions?: { code?: string; field?: string } }[];
}

export interface ConfigOverrides {
  llm?: Partial<LlmConfig>;
  websocket?: Partial<WebSocketConfig>;
  mcp?: Partial<McpConfig>;
  search?: SearchConfig;
  events?: Partial<EventsConfig>;
  shutdownGraceMs?: number;
  toolsDir?: string;
  http?: Partial<HttpConfig>;
  maxAgentsPerUser?: number;
  triggers?: Partial<TriggersConfig>;
  work?: Partial<WorkConfig>;
  limits?: Partial<Omit<LimitsConfig, 'rate'>> & { rate?: Partial<LimitsConfig['rate']> };
  apq?: ApqConfig;
  redisUrl?: string;
  collections?: Partial<CollectionsConfig>;
  /** The key deployments' secrets are sealed with; by default one of the test's own (never a file in the tree). */
  secrets?: SecretsConfig;
  deployments?: Partial<Omit<DeploymentsConfig, 'telegram'>> & { telegram?: Partial<DeploymentsConfig['telegram']> };
  jobs?: Partial<JobsConfig>;
  webhooks?: Partial<WebhooksConfig>;
  outbound?: Partial<OutboundConfig>;
  instanceHeartbeatMs?: number;
  /** A media folder of the test's own (left in place when the app closes); by default a new one, removed with it. */
  mediaDir?: string;
}

/**
 * The production configuration with nothing set (offline responder without pauses), on
 * `database`, except that requests are not rate-limited unless a test says how (most tests make
 * many requests with one key, faster than any client would), and that outbound calls may go to
 * loopback over http.
 */
export function testConfig(database: DatabaseConfig, overrides: ConfigOverrides = {}): Config {
  const base = loadConfig({
    LOG_LEVEL: 'silent',
    OFFLINE_TOKEN_DELAY_MS: '0',
    RATE_LIMIT_DEFAULT: '0',
    RATE_LIMIT_ANONYMOUS: '0',
    RATE_LIMIT_FREE: '0',
    RATE_LIMIT_PRO: '0',
  });
  return {
    ...base,
    port: 0,
    host: '127.0.0.1',
    database,
    toolsDir: overrides.toolsDir ?? toolsDir,
    mediaDir: overrides.mediaDir ?? mkdtempSync(join(tmpdir(), 'parley-media-')),
    llm: { ...base.llm, ...overrides.llm },
    events: { ...base.events, ...overrides.events },
    search: overrides.search ?? base.search,
    websocket: { ...base.websocket, ...overrides.websocket },
    mcp: { ...base.mcp, ...overrides.mcp },
    shutdownGraceMs: overrides.shutdownGraceMs ?? base.shutdownGraceMs,
    http: { ...base.http, ...overrides.http },
    maxAgentsPerUser: overrides.maxAgentsPerUser ?? base.maxAgentsPerUser,
    triggers: { ...base.triggers, ...overrides.triggers },
    work: { ...base.work, ...overrides.work },
    limits: { ...base.limits, ...overrides.limits, rate: { ...base.limits.rate, ...overrides.limits?.rate } },
    apq: overrides.apq ?? base.apq,
    collections: { ...base.collections, ...overrides.collections },
    secrets: overrides.secrets ?? { key: randomBytes(32), previous: [], keyFile: undefined, shared: false },
    deployments: {
      ...base.deployments,
      ...overrides.deployments,
      telegram: { ...base.deployments.telegram, ...overrides.deployments?.telegram },
    },
    jobs: { ...base.jobs, ...overrides.jobs },
    webhooks: { ...base.webhooks, ...overrides.webhooks },
    // Tool services, receivers and fakes of tests listen on loopback, over http: what an operator
    // allows for tests (docs/outbound.md). A test of the refusals sets both false.
    outbound: { allowHttp: true, allowPrivate: true, ...overrides.outbound },
    // CI's second lane runs everything on PostgreSQL with live events through Redis.
    redisUrl: 'redisUrl' in overrides ? overrides.redisUrl : process.env.TEST_REDIS_URL,
    instanceHeartbeatMs: overrides.instanceHeartbeatMs ?? base.instanceHeartbeatMs,
    // On CI's shared Redis every test app is a deployment of its own: counts and slots must not
    // add up across them. Apps given a Redis of their test's share it, as instances do.
    redisKeyPrefix: 'redisUrl' in overrides ? '' : `test-${randomUUID()}:`,
  };
}

/**
 * The real app (same factory as production) on a free loopback port, over a fresh database, or
 * over `shared` (one that several instances use; it is left in place when this one closes).
 * `queries` records every SQL statement Prisma sends, for N+1 checks. A start that fails halfway
 * undoes what it did (the app, its media folder, a database made on CI's server) before throwing.
 * `beforeListen` may add routes of a test's own (a route a feature would declare) to the built app.
 */
export async function startTestApp(
  overrides: ConfigOverrides = {},
  shared?: DatabaseConfig,
  hooks: { beforeListen?(app: App, config: Config): void } = {},
) {
  const queries: string[] = [];
  const routes: { method: string | string[]; url: string }[] = [];
  const ends: (() => unknown)[] = [];
  const end = async () => {
    let failure: unknown;
    for (const step of ends.splice(0).reverse()) {
      try {
        await step();
      } catch (e) {
        failure ??= e;
      }
    }
    if (failure) throw failure;
  };
  let app: App;
  let url: string;
  try {
    const db = shared ? { config: shared, drop: async () => {} } : await freshDatabase();
    ends.push(() => db.drop());
    const config = testConfig(db.config, overrides);
    if (!overrides.mediaDir) ends.push(() => rmSync(config.mediaDir, { recursive: true, force: true }));
    app = await buildApp(config, {
      onQuery: (sql) => queries.push(sql),
      onRoute: ({ method, url }) => void routes.push({ method, url }),
    });
    ends.push(() => app.close());
    hooks.beforeListen?.(app, config);
    url = await app.listen({ port: 0, host: '127.0.0.1' });
  } catch (e) {
    await end().catch(() => {});
    throw e;
  }
  const services = app.services;
  let closed: Promise<void> | undefined;
  let userCount = 0;

  async function createUser(username = `user${++userCount}_${Math.random().toString(36).slice(2, 8)}`): Promise<TestUser> {
    const user = await services.creators.ensureUser(username);
    const { apiKey } = await services.apiKeys.create(user.id);
    return { id: user.id, username: user.username, apiKey };
  }

  async function rest<T = any>(
    method: string,
    path: string,
    options: { key?: string | null; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
  ): Promise<RestResponse<T>> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.key) headers['x-api-key'] = options.key;
    let payload: string | undefined = options.rawBody;
    if (options.body !== undefined) payload = JSON.stringify(options.body);
    if (payload !== undefined) headers['content-type'] ??= 'application/json';
    const response = await fetch(`${url}${path}`, { method, headers, body: payload });
    const text = await response.text();
    let body: any = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      // leave non-JSON bodies as text so a test can show what came back
    }
    return { status: response.status, body, headers: response.headers };
  }

  async function gql<TResult, TVariables>(
    document: TypedDocumentNode<TResult, TVariables>,
    ...[variables, key]: TVariables extends Record<string, never>
      ? [variables?: TVariables, key?: string | null]
      : [variables: TVariables, key?: string | null]
  ): Promise<GraphQLResponse<TResult>> {
    const response = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/graphql-response+json, application/json',
        ...(key ? { 'x-api-key': key } : {}),
      },
      body: JSON.stringify({ query: print(document), variables }),
    });
    const body = (await response.json()) as { data?: TResult; errors?: GraphQLResponse<TResult>['errors'] };
    return { status: response.status, data: body.data, errors: body.errors };
  }

  /**
   * The SQL statements `run` (a read, run three times) causes: the fewest of the three. Work the
   * service does on its own (a job, a timer, what follows a reply) can fall inside one window on a
   * busy machine, and a first run can fill a cache; a statement per row is in every run.
   */
  async function countQueries(run: () => Promise<unknown>): Promise<number> {
    const counts: number[] = [];
    for (let i = 0; i < 3; i++) {
      const before = queries.length;
      await run();
      counts.push(queries.length - before);
    }
    return Math.min(...counts);
  }

  return {
    url,
    app,
    services,
    db: services.db,
    queries,
    /** Every route the app serves, as Fastify registered them. */
    routes,
    createUser,
    rest,
    gql,
    countQueries,
    /** Closes the app, then removes its media folder and drops its database; once, however often it is called. */
    close() {
      closed ??= end();
      return closed;
    },
  };
}

export type TestApp = Awaited<ReturnType<typeof startTestApp>>;
