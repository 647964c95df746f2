import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import type { SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import type { DatabaseConfig } from '../config.ts';
import { PrismaClient } from '../generated/prisma/client.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { startAdapterThread } from './adapter-thread.ts';
import { PostgresMigrationAdapterFactory } from './postgres-migrations.ts';
import { buildSnapshot, preparePgdata } from './snapshot.ts';

type Adapter = NonNullable<ConstructorParameters<typeof PrismaClient>[0]['adapter']>;

/**
 * Secret columns are omitted from every query unless one asks for them explicitly, so a
 * forgotten `select` can never leak a deployment secret or a key hash.
 */
function createClient(adapter: Adapter, onQuery?: (sql: string) => void) {
  const prisma = new PrismaClient({
    adapter,
    log: onQuery ? [{ emit: 'event', level: 'query' }] : [],
    omit: { deployment: { secrets: true }, apiKey: { hash: true } },
    // Interactive transactions queue for the single embedded connection or the pool. Under load
    // work waits rather than fails, so the wait is bounded far above what a burst of a thousand
    // prompts produces (seconds); only a database that is stuck reaches it (docs/faults.md).
    transactionOptions: { maxWait: 60_000, timeout: 15_000 },
  });
  if (onQuery) prisma.$on('query' as never, (e: { query: string }) => onQuery(e.query));
  return prisma;
}

export type Db = ReturnType<typeof createClient>;

/**
 * Where the job queue (`src/jobs/`) keeps its jobs: on PostgreSQL a small pool of its own; on
 * the embedded database the one connection, through the database thread.
 */
export type JobsConnection =
  | { kind: 'postgres'; url: string }
  | { kind: 'embedded'; executeSql(text: string, values?: unknown[]): Promise<{ rows: any[] }> };

export interface Database {
  prisma: Db;
  jobs: JobsConnection;
  /** What the schema engine applies migrations through. */
  migrationAdapterFactory: SqlMigrationAwareDriverAdapterFactory;
  /**
   * Runs `work` (applying migrations) while no other process does the same on this database:
   * instances started together would otherwise race for the schema engine's own lock, which
   * gives up after ten seconds.
   */
  exclusively<T>(work: () => Promise<T>): Promise<T>;
  /** For the start-up line: never includes credentials. */
  description: string;
  /** True when the database answers a trivial query within `timeoutMs`. */
  ping(timeoutMs: number): Promise<boolean>;
  /** This open made a new embedded data directory from the build's migrated snapshot. */
  fromSnapshot?: boolean;
  close(): Promise<void>;
}

/** A database that does not answer in time counts as down: a health check must not hang on it. */
async function ping(prisma: Db, timeoutMs: number) {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
  try {
    return await Promise.race([prisma.$queryRaw`SELECT 1`.then(() => true), late]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

export interface OpenOptions {
  /** Called with every SQL statement Prisma sends (tests count them to catch N+1 queries). */
  onQuery?: (sql: string) => void;
  /**
   * A migrated, empty cluster a new data directory starts from (see snapshot.ts); false: PGlite
   * creates it (initdb) and the migrations run in full. Defaults to the build's snapshot.
   */
  snapshot?: string | false;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;

export async function openDatabase(config: DatabaseConfig, options: OpenOptions = {}): Promise<Database> {
  if (config.kind === 'postgres') {
    // Without a connect timeout, a database host that stops answering (rather than refusing)
    // would hold every request that needs a connection until the operating system gives up.
    const connectTimeoutMs = config.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const thread = startAdapterThread(
      new URL('./pg-worker.js', import.meta.url),
      { url: config.url, connectTimeoutMs },
      '@prisma/adapter-pg',
    );
    const prisma = createClient(thread.factory, options.onQuery);
    await started(thread, prisma, async () => {});
    const url = new URL(config.url);
    return {
      prisma,
      jobs: { kind: 'postgres', url: config.url },
      migrationAdapterFactory: new PostgresMigrationAdapterFactory({ connectionString: config.url, max: 1 }),
      exclusively: (work) => holdingAdvisoryLock(config.url, work),
      description: `PostgreSQL at ${url.hostname}:${url.port || 5432}${url.pathname}`,
      ping: (timeoutMs) => ping(prisma, timeoutMs),
      async close() {
        await prisma.$disconnect();
        await thread.close();
      },
    };
  }
  // DATA_DIR holds the lock file and, in pgdata/, PGlite's own files (it wants a directory to itself).
  let unlock = async () => {};
  let fromSnapshot = false;
  const pgdata = config.dataDir ? join(config.dataDir, 'pgdata') : undefined;
  if (config.dataDir) {
    // Owner-only: it holds the database files and the service's command socket.
    await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
    unlock = await lockDataDir(config.dataDir);
  }
  try {
    if (pgdata) fromSnapshot = await preparePgdata(pgdata, options.snapshot ?? buildSnapshot);
  } catch (e) {
    await unlock();
    throw e;
  }
  const pglite = startAdapterThread(new URL('./pglite-worker.js', import.meta.url), { dataDir: pgdata }, 'pglite-prisma-adapter');
  const prisma = createClient(pglite.factory, options.onQuery);
  await started(pglite, prisma, unlock);
  return {
    prisma,
    jobs: { kind: 'embedded', executeSql: pglite.executeSql },
    migrationAdapterFactory: pglite.factory,
    // The data directory's lock already keeps every other process out.
    exclusively: (work) => work(),
    description: config.dataDir
      ? `embedded PGlite in ${config.dataDir}${fromSnapshot ? ' (new: copied from the migrated snapshot)' : ''}`
      : 'embedded PGlite in memory',
    fromSnapshot,
    ping: (timeoutMs) => ping(prisma, timeoutMs),
    async close() {
      await prisma.$disconnect();
      await pglite.close();
      await unlock();
    },
  };
}

/**
 * Waits for the database thread and for Prisma: Prisma compiles its query compiler
 * (WebAssembly) on this thread while the worker starts on its own. A start that fails stops
 * the thread and lets go of what was taken (`release`).
 */
async function started(thread: ReturnType<typeof startAdapterThread>, prisma: Db, release: () => Promise<void>) {
  const failed = (await Promise.allSettled([thread.ready, prisma.$connect()])).find((r) => r.status === 'rejected');
  if (!failed) return;
  await thread.stop();
  await release();
  throw failed.reason;
}

/** A session-level advisory lock of parley's own, waited for as long as it takes. */
async function holdingAdvisoryLock<T>(url: string, work: () => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`SELECT pg_advisory_lock(hashtext('parley:migrations'))`);
    return await work();
  } finally {
    await client.end().catch(() => {});
  }
}
