import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { PrismaPg } from '@prisma/adapter-pg';
import type { SqlMigrationAwareDriverAdapterFactory } from '@prisma/driver-adapter-utils';
import type { DatabaseConfig } from '../config.ts';
import { PrismaClient } from '../generated/prisma/client.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { startPGliteThread } from './pglite-thread.ts';
import { PostgresMigrationAdapterFactory } from './postgres-migrations.ts';
import { buildSnapshot, preparePgdata } from './snapshot.ts';

type Adapter = NonNullable<ConstructorParameters<typeof PrismaClient>[0]["adapter"]>;

/**
 * Secret columns are omitted from every query unless one asks for them explicitly, so a
 * forgotten `select` can never leak a deployment secret or a key hash.
 */
function createClient(adapter: Adapter, onQuery?: (sql: string) => void) {
  const prisma = new PrismaClient({
    adapter,
    log: onQuery ? [{ emit: 'event', level: 'query' }] : [],
    omit: { deployment: { secrets: true }, apiKey: { hash: true } },
    // Interactive transactions queue for the single embedded connection or the pool; the
    // defaults (2 s wait) fail under bursts of concurrent writes.
    transactionOptions: { maxWait: 10_000, timeout: 15_000 },
  });
  if (onQuery) prisma.$on('query' as never, (e: { query: string }) => onQuery(e.query));
  return prisma;
}

export type Db = ReturnType<typeof createClient>;

export interface Database {
  prisma: Db;
  /** What the schema engine applies migrations through. */
  migrationAdapterFactory: SqlMigrationAwareDriverAdapterFactory;
  /** For the start-up line: never includes credentials. */
  description: string;
  /** This open made a new embedded data directory from the build's migrated snapshot. */
  fromSnapshot?: boolean;
  close(): Promise<void>;
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

export async function openDatabase(config: DatabaseConfig, options: OpenOptions = {}): Promise<Database> {
  if (config.kind === 'postgres') {
    const adapterFactory = new PrismaPg({ connectionString: config.url });
    const prisma = createClient(adapterFactory, options.onQuery);
    const url = new URL(config.url);
    return {
      prisma,
      migrationAdapterFactory: new PostgresMigrationAdapterFactory({ connectionString: config.url, max: 1 }),
      description: `PostgreSQL at ${url.hostname}:${url.port || 5432}${url.pathname}`,
      close: () => prisma.$disconnect(),
    };
  }
  // DATA_DIR holds the lock file and, in pgdata/, PGlite's own files (it wants a directory to itself).
  let unlock = async () => {};
  let fromSnapshot = false;
  const pgdata = config.dataDir ? join(config.dataDir, 'pgdata') : undefined;
  if (config.dataDir) {
    await mkdir(config.dataDir, { recursive: true });
    unlock = await lockDataDir(config.dataDir);
  }
  try {
    if (pgdata) fromSnapshot = await preparePgdata(pgdata, options.snapshot ?? buildSnapshot);
  } catch (e) {
    await unlock();
    throw e;
  }
  const pglite = startPGliteThread(pgdata);
  const prisma = createClient(pglite.factory, options.onQuery);
  // Prisma compiles its query compiler (WebAssembly) on this thread while PGlite starts on its own.
  const failed = (await Promise.allSettled([pglite.ready, prisma.$connect()])).find((r) => r.status === 'rejected');
  if (failed) {
    await pglite.stop();
    await unlock();
    throw failed.reason;
  }
  return {
    prisma,
    migrationAdapterFactory: pglite.factory,
    description: config.dataDir ? `embedded PGlite in ${config.dataDir}${fromSnapshot ? ' (new: copied from the migrated snapshot)' : ''}` : 'embedded PGlite in memory',
    fromSnapshot,
    async close() {
      await prisma.$disconnect();
      await pglite.close();
      await unlock();
    },
  };
}
