import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/db/database.ts';
import { applyMigrations } from '../../src/db/migrate.ts';
import { runnerStatements } from '../../src/domain/triggers/runner-statements.ts';
import { type Claim, triggerStore } from '../../src/domain/triggers/store.ts';
import { freshDatabase } from '../helpers/database.ts';
import { until } from '../helpers/until.ts';

// The runner's claims and links of runs going on together share statements
// (`src/domain/triggers/runner-statements.ts`): what each caller gets must be what its own
// statement would have given it, on the real database, whatever else was in the group.

describe('trigger runs claimed and linked together', () => {
  let db: Database;
  let kind: 'pglite' | 'postgres';
  let drop: () => Promise<void>;
  let statements: ReturnType<typeof runnerStatements>;
  let agentId: string;
  let userId: string;
  // On the real clock, as the runner claims: the occurrence came due a minute ago, the next is a day after it.
  const due = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000);
  const next = new Date(due.getTime() + 86_400_000);

  beforeAll(async () => {
    const fresh = await freshDatabase();
    drop = fresh.drop;
    kind = fresh.config.kind;
    db = await openDatabase(fresh.config);
    await applyMigrations(db.migrationAdapterFactory);
    statements = runnerStatements(triggerStore(db.prisma));
    const owner = await db.prisma.user.create({ data: { username: 'claims-owner' } });
    const agentUser = await db.prisma.user.create({ data: { username: 'claims-agent' } });
    await db.prisma.agent.create({ data: { id: agentUser.id, ownerId: owner.id, name: 'Claimed' } });
    userId = owner.id;
    agentId = agentUser.id;
  });
  afterAll(async () => {
    await db?.close();
    await drop?.();
  });
  beforeEach(async () => {
    await db.prisma.trigger.deleteMany();
  });

  const dueTrigger = (status: 'active' | 'paused' = 'active') =>
    db.prisma.trigger.create({
      data: { name: 't', prompt: 'p', agentId, userId, cron: '0 0 9 * * *', status, nextRun: status === 'active' ? due : null },
    });
  const onSchedule = (scheduledFor = due): Claim => ({ runId: randomUUID(), at: new Date(), scheduledFor, next, status: 'active' });
  const byHand = (): Claim => ({ runId: randomUUID(), at: new Date(), scheduledFor: null });

  it('claims each due trigger of a group once, its run written for its occurrence, its next run planned', async () => {
    const triggers = await Promise.all([dueTrigger(), dueTrigger(), dueTrigger()]);
    const claims = triggers.map(() => onSchedule());
    const claimed = await Promise.all(triggers.map((t, i) => statements.claimRun(t.id, claims[i]!)));

    claimed.forEach((t, i) => {
      expect(t?.id).toBe(triggers[i]!.id);
      expect(t?.runningRunId).toBe(claims[i]!.runId);
      expect(t?.nextRun).toEqual(next);
    });
    const runs = await db.prisma.triggerRun.findMany({ where: { triggerId: { in: triggers.map((t) => t.id) } } });
    expect(runs.map((r) => [r.id, r.triggerId, r.scheduledFor]).sort()).toEqual(
      triggers.map((t, i) => [claims[i]!.runId, t.id, due]).sort(),
    );
  });

  it('gives an occurrence claimed twice in one group to one claim, with one run', async () => {
    const trigger = await dueTrigger();
    const [a, b] = [onSchedule(), onSchedule()];
    const results = await Promise.all([statements.claimRun(trigger.id, a), statements.claimRun(trigger.id, b)]);

    expect(results.filter(Boolean)).toHaveLength(1);
    const runs = await db.prisma.triggerRun.findMany({ where: { triggerId: trigger.id } });
    expect(runs).toHaveLength(1);
    expect([a.runId, b.runId]).toContain(runs[0]!.id);
  });

  it('refuses only the claim whose occurrence has a run already; the others of its group are claimed', async () => {
    const [ran, fresh] = await Promise.all([dueTrigger(), dueTrigger()]);
    // An occurrence run before, its trigger left due for it (as a stale job would find it).
    await db.prisma.triggerRun.create({ data: { triggerId: ran.id, scheduledFor: due, status: 'completed' } });
    const results = await Promise.all([statements.claimRun(ran.id, onSchedule()), statements.claimRun(fresh.id, onSchedule())]);

    expect(results[0]).toBeNull();
    expect(results[1]?.id).toBe(fresh.id);
    expect(await db.prisma.triggerRun.count({ where: { triggerId: ran.id } })).toBe(1);
    expect((await db.prisma.trigger.findUniqueOrThrow({ where: { id: ran.id } })).runningRunId).toBeNull();
  });

  it('claims by hand a paused trigger beside scheduled ones, its schedule left as it was; a trigger not due is not claimed', async () => {
    const [paused, scheduled, notDue] = await Promise.all([dueTrigger('paused'), dueTrigger(), dueTrigger()]);
    const [hand, onTime, late] = await Promise.all([
      statements.claimRun(paused.id, byHand()),
      statements.claimRun(scheduled.id, onSchedule()),
      statements.claimRun(notDue.id, onSchedule(new Date(due.getTime() - 60_000))),
    ]);

    expect(hand).toMatchObject({ id: paused.id, status: 'paused', nextRun: null });
    expect(onTime).toMatchObject({ id: scheduled.id, nextRun: next });
    expect(late).toBeNull();
    const handRun = await db.prisma.triggerRun.findFirstOrThrow({ where: { triggerId: paused.id } });
    expect(handRun.scheduledFor).toBeNull();
    expect(await db.prisma.triggerRun.count({ where: { triggerId: notDue.id } })).toBe(0);
  });

  it('finds and links the runs of a group, each to its own session', async () => {
    const triggers = await Promise.all([dueTrigger(), dueTrigger()]);
    const found = await Promise.all([...triggers.map((t) => statements.find(t.id)), statements.find(randomUUID())]);
    expect(found.map((t) => t?.id ?? null)).toEqual([...triggers.map((t) => t.id), null]);

    const claims = triggers.map(() => onSchedule());
    await Promise.all(triggers.map((t, i) => statements.claimRun(t.id, claims[i]!)));
    const sessions = await Promise.all(triggers.map(() => db.prisma.session.create({ data: { ownerId: userId } })));
    await Promise.all(claims.map((c, i) => statements.linkRun(c.runId, sessions[i]!.id, null)));

    const runs = await db.prisma.triggerRun.findMany({ where: { id: { in: claims.map((c) => c.runId) } } });
    expect(new Map(runs.map((r) => [r.id, r.sessionId]))).toEqual(new Map(claims.map((c, i) => [c.runId, sessions[i]!.id])));
  });

  it('settles a run while its trigger is being deleted without a deadlock: the run goes with its trigger', async () => {
    const trigger = await dueTrigger();
    const claim = onSchedule();
    await statements.claimRun(trigger.id, claim);
    const store = triggerStore(db.prisma);
    let settling: ReturnType<typeof store.settle> | undefined;
    // A delete takes the trigger's row, then its runs' (the cascade). The run settles in between:
    // settled with the run's row first, the two waited for each other until PostgreSQL failed one.
    await db.prisma.$transaction(async (tx) => {
      await tx.$queryRaw`SELECT 1 FROM "Trigger" WHERE "id" = ${trigger.id} FOR UPDATE`;
      settling = store.settle(claim.runId, { status: 'completed' }, 3);
      // On the embedded database there is one connection: the settle waits for this transaction.
      if (kind === 'postgres') await until('the settle to wait for a lock', () => lockWaits(), { timeoutMs: 10_000 });
      await tx.trigger.delete({ where: { id: trigger.id } });
    });
    await expect(settling).resolves.toBeNull();
    expect(await db.prisma.triggerRun.count({ where: { id: claim.runId } })).toBe(0);
  });

  it('reads, of the runs under way, only those no live reply accounts for: ended, never linked, or past the time limit', async () => {
    const store = triggerStore(db.prisma);
    const session = await db.prisma.session.create({ data: { ownerId: userId } });
    const reply = (status: 'streaming' | 'failed') =>
      db.prisma.message.create({ data: { sessionId: session.id, role: 'assistant', senderId: agentId, status } });
    const hour = 3_600_000;
    /** A trigger run by hand since `startedMsAgo`, its run linked to a reply of this status (or to none). */
    const running = async (startedMsAgo: number, status: 'streaming' | 'failed' | null) => {
      const trigger = await dueTrigger();
      const claim = { ...byHand(), at: new Date(Date.now() - startedMsAgo) };
      await statements.claimRun(trigger.id, claim);
      if (status) await statements.linkRun(claim.runId, session.id, (await reply(status)).id);
      return trigger.id;
    };
    const writing = await running(1_000, 'streaming');
    const ended = await running(1_000, 'failed');
    const unlinked = await running(1_000, null);
    const stuck = await running(2 * hour, 'streaming');
    await dueTrigger();
    const stuckBefore = new Date(Date.now() - hour);
    const found = await store.underWay(null, stuckBefore, 10);
    expect(new Set(found.map((t) => t.id))).toEqual(new Set([ended, unlinked, stuck]));
    expect(found.map((t) => t.id)).not.toContain(writing);
    // A batch at a time, by id.
    const ids = found.map((t) => t.id);
    expect(ids).toEqual([...ids].sort());
    const [first, ...rest] = ids;
    expect((await store.underWay(null, stuckBefore, 1)).map((t) => t.id)).toEqual([first]);
    expect((await store.underWay(first!, stuckBefore, 10)).map((t) => t.id)).toEqual(rest);
  });

  /** Statements of this database waiting for a row lock another holds, seen from a third connection. */
  const lockWaits = async () => {
    const [row] = await db.prisma.$queryRaw<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`;
    return row!.n > 0;
  };
});
