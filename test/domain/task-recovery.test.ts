import { beforeAll, describe, expect, it } from 'vitest';
import { mannaOf } from '../../src/domain/core/manna.ts';
import { mannaService, prismaMannaStore } from '../../src/domain/manna/index.ts';
import type { TaskEvents } from '../../src/domain/tasks/events.ts';
import { taskStore } from '../../src/domain/tasks/index.ts';
import { recoverAbandonedTasks } from '../../src/domain/tasks/recovery.ts';
import { SERVER_STOPPED } from '../../src/domain/tasks/runner.ts';
import { domainDatabase, people } from '../helpers/domain-database.ts';
import { ledgerMismatches } from '../helpers/ledger.ts';

/**
 * Tasks a process left unsettled, settled by recovery as instances run it: for one instance
 * that is gone, several times at once, never touching a live instance's tasks. Over the tasks'
 * store on a migrated database (no app), with their changes published to the owner's feed on the
 * lane's bus as the tasks service publishes them. (The service closing with a task running is in
 * test/faults/shutdown.test.ts: it needs the app.)
 */
describe('recovering tasks made by themselves', () => {
  const t = domainDatabase();
  let alice: { id: string };
  let events: TaskEvents;
  /** The tasks service's `recoverAbandoned`, on the store and feed it is given in src/domain/services.ts. */
  const recoverAbandoned = (instance?: string) => recoverAbandonedTasks(taskStore(t.db), events, instance);

  beforeAll(async () => {
    const bus = t.bus();
    events = { publish: (userId, event) => bus.feeds.publish(userId, event).then(() => {}) };
    alice = await (await people(t.db)).user('alice');
    await mannaService(prismaMannaStore(t.db)).grant('alice', '10', 'forever');
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
    const settled = await Promise.all(Array.from({ length: 4 }, () => recoverAbandoned('gone')));
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
    expect(await ledgerMismatches(t.db)).toEqual([]);
    // Alone at start, every unsettled task is taken.
    expect((await recoverAbandoned()).map((s) => s.id)).toEqual([alive]);
    expect(await ledgerMismatches(t.db)).toEqual([]);
  });
});
