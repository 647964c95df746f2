import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import { type EventsConfig, loadConfig } from '../../src/config.ts';
import { type Database, type Db, type JobsConnection, openDatabase } from '../../src/db/database.ts';
import { applyMigrations } from '../../src/db/migrate.ts';
import type { EventBus } from '../../src/domain/core/bus.ts';
import { agentService, agentStore } from '../../src/domain/agents/index.ts';
import { creatorService, creatorStore } from '../../src/domain/creators/index.ts';
import { loadToolRegistry } from '../../src/domain/tools/index.ts';
import { createEventBus } from '../../src/realtime/index.ts';
import { freshDatabase } from './database.ts';

/** The production configuration with nothing set: what the domain's services are given by default. */
export const domainConfig = loadConfig({ LOG_LEVEL: 'silent' });

const toolsDir = fileURLToPath(new URL('../../tools', import.meta.url));

/** A log for services whose warnings the test does not read. */
export const quietLog = { error: () => {}, warn: () => {}, info: () => {} };

export interface DomainDatabase {
  /** Prisma over the migrated database, as the app's stores are given it. */
  readonly db: Db;
  /** Where the job queue keeps its jobs on this database (`pgBossQueue`'s connection), as the app gives it. */
  readonly jobs: JobsConnection;
  /** Every SQL statement Prisma sent, in order (for the checks of how many statements a write takes). */
  readonly queries: string[];
  /** The live events bus CI's lane runs on: through Redis on the second lane (TEST_REDIS_URL), else in process; closed after the file. */
  bus(events?: Partial<EventsConfig>): EventBus;
}

/**
 * The domain over a real database, with no app: before the file's tests, a fresh database (PGlite
 * in this process, or a new database on TEST_DATABASE_URL), migrated as the app migrates it;
 * after them, it is closed and dropped, also when opening or migrating failed halfway. Tests build
 * the services they test from their Prisma stores over `db`, as `src/domain/services.ts` does.
 */
export function domainDatabase(): DomainDatabase {
  let database: Database | undefined;
  const queries: string[] = [];
  const ends: (() => unknown)[] = [];
  beforeAll(async () => {
    const fresh = await freshDatabase();
    ends.push(() => fresh.drop());
    database = await openDatabase(fresh.config, { onQuery: (sql) => queries.push(sql) });
    const opened = database;
    ends.push(() => opened.close());
    await opened.exclusively(() => applyMigrations(opened.migrationAdapterFactory));
  });
  afterAll(async () => {
    let failure: unknown;
    for (const end of ends.splice(0).reverse()) {
      try {
        await end();
      } catch (e) {
        failure ??= e;
      }
    }
    if (failure) throw failure;
  });
  return {
    get db() {
      if (!database) throw new Error('domain-database: the database is opened before the tests, in beforeAll');
      return database.prisma;
    },
    get jobs() {
      if (!database) throw new Error('domain-database: the database is opened before the tests, in beforeAll');
      return database.jobs;
    },
    queries,
    bus(events = {}) {
      const bus = createEventBus({
        redisUrl: process.env.TEST_REDIS_URL,
        // Each file's own on CI's shared Redis, as each test app is.
        redisKeyPrefix: `test-${randomUUID()}:`,
        events: { ...domainConfig.events, ...events },
      });
      // Closed first: its last reads must not outlive the database.
      ends.push(() => bus.close());
      return bus;
    },
  };
}

/** Users and agents as their services make them: the rows most domain tests start from. */
export async function people(db: Db) {
  const creators = creatorService(creatorStore(db));
  const agents = agentService(agentStore(db), await loadToolRegistry(toolsDir), domainConfig);
  return {
    user: (username: string) => creators.ensureUser(username),
    agent: (owner: { id: string }, fields: { name: string; key: string; public?: boolean }) =>
      agents.create({ id: owner.id }, { public: true, ...fields }),
  };
}
