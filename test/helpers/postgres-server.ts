import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { trackChild } from './process.ts';
import { startPostgresCluster } from './servers.ts';

/**
 * Several instances need one database they can all reach, which embedded PGlite is not. This
 * gives a new database on TEST_DATABASE_URL's server when CI names one, and otherwise on a
 * throwaway PostgreSQL cluster (Debian's `postgresql` package) started for this test file and
 * removed when it ends.
 */
export async function freshPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const serverUrl = process.env.TEST_DATABASE_URL ?? (await throwawayCluster());
  const name = `parley_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
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
