import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DatabaseConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { mannaOf } from '../../src/domain/core/manna.ts';
import { SERVER_STOPPED } from '../../src/domain/tasks/runner.ts';
import { taskStore } from '../../src/domain/tasks/store.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { freshDatabase } from '../helpers/database.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { viewerOf } from '../helpers/rest-helpers.ts';
import { setUp } from '../helpers/set-up.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';

/** Every user's balances equal the sums of their ledger rows. */
const ledgerMatches = async (t: Pick<TestApp, 'db'>) =>
  t.db.$queryRaw`SELECT u."username" FROM "User" u
    WHERE u."subscriptionBalance" <> (SELECT coalesce(sum("amount"), 0) FROM "MannaLedger" WHERE "userId" = u."id" AND "kind" = 'subscription')
       OR u."foreverBalance" <> (SELECT coalesce(sum("amount"), 0) FROM "MannaLedger" WHERE "userId" = u."id" AND "kind" = 'forever')`;

/**
 * Tasks a process left unsettled, settled by recovery as instances run it: for one instance
 * that is gone, several times at once, never touching a live instance's tasks.
 */
describe('recovering tasks made by themselves', () => {
  let t: TestApp;
  let alice: TestUser;

  setUp(async (start) => {
    t = await start.app();
    alice = await t.createUser('alice');
    await t.services.manna.grant('alice', '10', 'forever');
  });

  /** A task as a process running it leaves it: saved with its hold, then started. */
  async function left(instance: string, status: 'pending' | 'running') {
    const store = taskStore(t.db);
    const task = await store.create(
      { userId: alice.id, tool: 'flux_dev', args: { prompt: 'x' }, cost: mannaOf(2), public: false, instance },
      100,
    );
    if ('refused' in task) throw new Error('refused');
    if (status === 'running') await store.start(task.id);
    return task.id;
  }

  it("settles a gone instance's tasks as failed, each hold returned once, however many instances look at once", async () => {
    const gone = [await left('gone', 'running'), await left('gone', 'pending')];
    const alive = await left('alive', 'running');
    expect((await t.db.user.findUniqueOrThrow({ where: { id: alice.id } })).foreverBalance.toNumber()).toBe(4);
    const settled = await Promise.all(Array.from({ length: 4 }, () => t.services.tasks.recoverAbandoned('gone')));
    expect(
      settled
        .flat()
        .map((s) => s.id)
        .sort(),
    ).toEqual([...gone].sort());
    for (const id of gone) {
      expect(await t.db.task.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: 'failed', error: SERVER_STOPPED });
      const rows = await t.db.mannaLedger.findMany({ where: { taskId: id } });
      expect(rows.map((r) => r.amount.toNumber()).sort()).toEqual([-2, 2]);
    }
    expect(await t.db.task.findUniqueOrThrow({ where: { id: alive } })).toMatchObject({ status: 'running' });
    expect((await t.db.user.findUniqueOrThrow({ where: { id: alice.id } })).foreverBalance.toNumber()).toBe(8);
    expect(await ledgerMatches(t)).toEqual([]);
    // Alone at start, every unsettled task is taken.
    expect((await t.services.tasks.recoverAbandoned()).map((s) => s.id)).toEqual([alive]);
    expect(await ledgerMatches(t)).toEqual([]);
  });
});

describe('closing the service with a task running', () => {
  // Started before the test, as every app is: under load a start-up alone can take most of a test's time.
  let tools: Awaited<ReturnType<typeof startFakeToolService>>;
  let database: DatabaseConfig;
  let t: TestApp;
  setUp(async (start) => {
    tools = await start.service(startFakeToolService({ hang: true }));
    const fresh = await start.service(freshDatabase(), (f) => f.drop());
    database =
      fresh.config.kind === 'postgres' ? fresh.config : { kind: 'pglite', dataDir: await mkdtemp(join(tmpdir(), 'parley-tasks-')) };
    const toolsDir = await toolRegistryWith({ slow: httpTool('slow', tools.url) });
    t = await start.app({ toolsDir, shutdownGraceMs: 200 }, database);
  });

  it('lets it run for the grace period, then settles it as failed with its hold given back', async () => {
    const user = await t.createUser('closer');
    await t.services.manna.grant(user.username, '3', 'forever');
    const task = await t.services.tasks.create(await viewerOf(t, user), { tool: 'slow', args: { prompt: 'x' } });
    while (tools.calls.length === 0) await new Promise((r) => setTimeout(r, 10));
    await t.close();
    await tools.calls[0]!.abandoned;
    const reopened = await openDatabase(database);
    try {
      expect(await reopened.prisma.task.findUniqueOrThrow({ where: { id: task.id } })).toMatchObject({
        status: 'failed',
        error: SERVER_STOPPED,
      });
      expect((await reopened.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).foreverBalance.toNumber()).toBe(3);
      expect(await ledgerMatches({ db: reopened.prisma as never })).toEqual([]);
    } finally {
      await reopened.close();
    }
  });
});
