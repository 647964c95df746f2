import { newDatabaseOn } from './database.ts';
import { trackChild } from './process.ts';
import { startPostgresCluster } from './servers.ts';

/**
 * Several instances need one database they can all reach, which embedded PGlite is not. This
 * gives a new database on TEST_DATABASE_URL's server when CI names one, and otherwise on a
 * throwaway PostgreSQL cluster (Debian's `postgresql` package) started for this test file and
 * removed when it ends.
 */
export async function freshPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  return newDatabaseOn(process.env.TEST_DATABASE_URL ?? (await throwawayCluster()));
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
