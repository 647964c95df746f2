import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.ts';
import { isDatabaseUnavailable } from '../../src/domain/core/stores/prisma-errors.ts';
import { databaseBehindProxy } from '../helpers/postgres-server.ts';
import type { TcpProxy } from '../helpers/tcp-proxy.ts';

/**
 * The failures a real PostgreSQL and the pg adapter produce when the connection is the problem,
 * each recognised as "the database is unavailable", and statement errors not.
 */
describe('isDatabaseUnavailable, on the errors a real server gives', () => {
  let behind: Awaited<ReturnType<typeof databaseBehindProxy>>;
  let database: { url: string };
  let proxy: TcpProxy;
  let db: Database;
  let admin: pg.Client;
  const name = () => new URL(database.url).pathname.slice(1);
  const failure = (run: Promise<unknown>) =>
    run.then(
      () => {
        throw new Error('expected a failure');
      },
      (e: unknown) => e,
    );
  /** Terminates this database's backends that are running `pattern`, once one is. */
  async function terminateWhenRunning(pattern: string) {
    for (;;) {
      const { rowCount } = await admin.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query LIKE $2 AND pid <> pg_backend_pid()',
        [name(), pattern],
      );
      if (rowCount) return;
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  beforeAll(async () => {
    behind = await databaseBehindProxy();
    ({ database, proxy, db } = behind);
    const adminUrl = new URL(database.url);
    adminUrl.pathname = '/postgres';
    admin = new pg.Client({ connectionString: adminUrl.toString() });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.end();
    await behind?.close();
  });

  it('a refused connection (P1001) and a reset one, in and out of transactions', async () => {
    await db.prisma.$queryRaw`SELECT 1`;
    await proxy.cut();
    try {
      const reset = await failure(db.prisma.$queryRaw`SELECT 1`);
      const refused = await failure(db.prisma.user.findMany());
      const inTransaction = await failure(db.prisma.$transaction((tx) => tx.user.count()));
      expect(refused).toMatchObject({ code: 'P1001' });
      for (const e of [reset, refused, inTransaction]) expect(isDatabaseUnavailable(e), String(e)).toBe(true);
      expect(await db.ping(1000)).toBe(false);
    } finally {
      await proxy.restore();
    }
    expect(await db.ping(5000)).toBe(true);
  });

  it('a backend terminated by an administrator in the middle of a statement (57P01)', async () => {
    const running = failure(db.prisma.$queryRaw`SELECT pg_sleep(30)`);
    await terminateWhenRunning('%pg_sleep(30)%');
    const e = await running;
    expect(JSON.stringify(e)).toContain('57P01');
    expect(isDatabaseUnavailable(e)).toBe(true);
  });

  it('a connection that ends in the middle of a transaction', async () => {
    const running = failure(
      db.prisma.$transaction(async (tx) => {
        await tx.$queryRaw`SELECT pg_sleep(30) AS in_transaction`;
      }),
    );
    await terminateWhenRunning('%in_transaction%');
    expect(isDatabaseUnavailable(await running)).toBe(true);
  });

  it('not a statement the database refuses', async () => {
    const user = await db.prisma.user.create({ data: { username: `u${Date.now()}` } });
    const duplicate = await failure(db.prisma.user.create({ data: { username: user.username } }));
    const broken = await failure(db.prisma.$queryRawUnsafe('SELECT * FROM no_such_table'));
    const negative = await failure(db.prisma.user.update({ where: { id: user.id }, data: { foreverBalance: -1 } }));
    for (const e of [duplicate, broken, negative]) expect(isDatabaseUnavailable(e), String(e)).toBe(false);
    expect(isDatabaseUnavailable(new Error('Something else'))).toBe(false);
  });
});
