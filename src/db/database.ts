import pg from 'pg';
import type { DatabaseConfig } from '../config.ts';
import { PrismaClient } from '../generated/prisma/client.ts';
import { withCommitSignals } from './after-commit.ts';
import { startAdapterThread } from './adapter-thread.ts';
import { startEmbedded } from './embedded.ts';
import { startPGliteThread } from './pglite-thread.ts';
import { buildSnapshot } from './snapshot.ts';
import { connectPostgres, type SqlDatabase } from './sql.ts';

type Adapter = NonNullable<ConstructorParameters<typeof PrismaClient>[0]['adapter']>;

/**
 * Secret columns are omitted from every query unless one asks for them explicitly, so a
 * forgotten `select` can never leak a deployment secret or a key hash.
 */
function createClient(adapter: Adapter, onQuery?: (sql: string) => void) {
  const prisma = new PrismaClient({
    adapter,
    log: onQuery ? [{ emit: 'event', level: 'query' }] : [],
    omit: {
      deployment: { secrets: true },
      apiKey: { hash: true },
      webhook: { secret: true, previousSecret: true },
      mcpServer: { authorization: true },
    },
    // Interactive transactions queue for the single embedded connection or the pool. Under load
    // work waits rather than fails, so the wait is bounded far above what a burst of a thousand
    // prompts produces (seconds); only a database that is stuck reaches it (docs/faults.md).
    transactionOptions: { maxWait: 60_000, timeout: 15_000 },
  });
  if (onQuery) prisma.$on('query' as never, (e: { query: string }) => onQuery(e.query));
  return withCommitSignals(prisma);
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
  /** What migrations are applied through (migrate.ts): plain SQL, below Prisma. */
  migrationAdapterFactory: SqlDatabase;
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
  /**
   * An embedded database in a data directory: copies its files into `dir` as they are at one
   * instant between two transactions, a cluster PGlite opens as if this one had stopped there.
   * Statements wait meanwhile. With `manifest`, `dir` holds a copy made while the database ran
   * (cluster-files.js `copyTreeSync`), and only the files changed since are copied again: the
   * wait is as long as copying those, not the whole database.
   */
  copyTo?(dir: string, manifest?: string): Promise<void>;
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
      migrationAdapterFactory: postgresOnDemand(config.url, config.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS),
      exclusively: (work) => holdingAdvisoryLock(config.url, work),
      description: `PostgreSQL at ${url.hostname}:${url.port || 5432}${url.pathname}`,
      ping: (timeoutMs) => ping(prisma, timeoutMs),
      async close() {
        await prisma.$disconnect();
        await thread.close();
      },
    };
  }
  const embedded = config.dataDir ? await startEmbedded(config.dataDir, options.snapshot ?? buildSnapshot) : undefined;
  const pglite = embedded?.pglite ?? startPGliteThread(undefined);
  const unlock = embedded?.unlock ?? (async () => {});
  const pgdata = embedded?.pgdata;
  const prisma = createClient(pglite.factory, options.onQuery);
  const { fromSnapshot } = await started(pglite, prisma, unlock);
  return {
    prisma,
    jobs: { kind: 'embedded', executeSql: pglite.executeSql },
    migrationAdapterFactory: pglite.sql,
    // The data directory's lock already keeps every other process out.
    exclusively: (work) => work(),
    description: config.dataDir
      ? `embedded PGlite in ${config.dataDir}${fromSnapshot ? ' (new: copied from the migrated snapshot)' : ''}`
      : 'embedded PGlite in memory',
    fromSnapshot,
    copyTo: pgdata
      ? (dir, manifest) =>
          pglite.sql.transaction(async (tx) => {
            // Written-back pages make the copy quick to open: little of the log to replay.
            await tx.exec('CHECKPOINT');
            await pglite.copyFiles(dir, manifest);
          })
      : undefined,
    ping: (timeoutMs) => ping(prisma, timeoutMs),
    async close() {
      await prisma.$disconnect();
      await pglite.close();
      await unlock();
    },
  };
}

/** PostgreSQL for migrations: a connection of its own for each call, closed after it. */
function postgresOnDemand(url: string, connectTimeoutMs: number): SqlDatabase {
  const using = async <T>(work: (db: SqlDatabase) => Promise<T>) => {
    const db = await connectPostgres(url, connectTimeoutMs);
    try {
      return await work(db);
    } finally {
      await db.close();
    }
  };
  return {
    rows: (sql, params) => using((db) => db.rows(sql, params)),
    exec: (script) => using((db) => db.exec(script)),
    transaction: (work) => using((db) => db.transaction(work)),
  };
}

/**
 * Waits for the database thread and for Prisma: Prisma compiles its query compiler
 * (WebAssembly) on this thread while the worker starts on its own. A start that fails stops
 * the thread and lets go of what was taken (`release`).
 */
async function started<R>(thread: { ready: Promise<R>; stop(): Promise<unknown> }, prisma: Db, release: () => Promise<void>): Promise<R> {
  const [ready, connected] = await Promise.allSettled([thread.ready, prisma.$connect()]);
  if (ready.status === 'fulfilled' && connected.status === 'fulfilled') return ready.value;
  const failed = ready.status === 'rejected' ? ready : (connected as PromiseRejectedResult);
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
