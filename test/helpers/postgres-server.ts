import { openDatabase } from '../../src/db/database.ts';
import { applyMigrations } from '../../src/db/migrate.ts';
import { newDatabaseOn } from './database.ts';
import { trackChild } from './process.ts';
import { startPostgresCluster } from './servers.ts';
import { startTcpProxy } from './tcp-proxy.ts';

/**
 * Several instances need one database they can all reach, which embedded PGlite is not. This
 * gives a new database on TEST_DATABASE_URL's server when CI names one, and otherwise on a
 * throwaway PostgreSQL cluster (Debian's `postgresql` package) started for this test file and
 * removed when it ends.
 */
export async function freshPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  return newDatabaseOn(process.env.TEST_DATABASE_URL ?? (await throwawayCluster()));
}

/**
 * A fresh, migrated PostgreSQL database opened through a proxy the test can cut: the database
 * taken away from a client that is running, without stopping it. `close` ends all three (the
 * client, the proxy, the database), as does a failure on the way.
 */
export async function databaseBehindProxy() {
  const ends: (() => Promise<void>)[] = [];
  const close = async () => {
    for (const end of ends.splice(0).reverse()) await end();
  };
  try {
    const database = await freshPostgresDatabase();
    ends.push(() => database.drop());
    const target = new URL(database.url);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    ends.push(() => proxy.close());
    const db = await openDatabase({ kind: 'postgres', url: proxy.through(database.url), connectTimeoutMs: 2000 });
    ends.push(() => db.close());
    await applyMigrations(db.migrationAdapterFactory);
    return { database, proxy, db, close };
  } catch (e) {
    await close();
    throw e;
  }
}

let cluster: Promise<string> | undefined;

function throwawayCluster(): Promise<string> {
  cluster ??= startPostgresCluster().then((server) => {
    trackChild(server.child);
    // Not afterAll: this may first run inside a hook, where no hook can be added.
    process.once('exit', server.stop);
    return server.url;
  });
  return cluster;
}
