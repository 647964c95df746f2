import { beforeAll, describe, expect, it } from 'vitest';
import { Prisma } from '../../src/generated/prisma/client.ts';
import type { EventBus } from '../../src/domain/core/bus.ts';
import { mannaService, prismaMannaStore } from '../../src/domain/manna/index.ts';
import { debit } from '../../src/domain/manna/stores/ledger.ts';
import { recoverAbandonedReplies, recoveryStore } from '../../src/domain/replies/index.ts';
import { ABANDONED_REPLY } from '../../src/domain/replies/recovery.ts';
import { domainDatabase, people } from '../helpers/domain-database.ts';

/**
 * The sweep that closes replies a dead process left `streaming`, on rows made as a process
 * writing replies makes them (a tool call holding manna included), run the way several
 * instances would: for one instance, for old replies, and several times at once.
 */
describe('recoverAbandonedReplies', () => {
  const t = domainDatabase();
  let bus: EventBus;
  let alice: { id: string };
  let agentId: string;

  beforeAll(async () => {
    bus = t.bus();
    const make = await people(t.db);
    alice = await make.user('alice');
    agentId = (await make.agent(alice, { name: 'Test agent', key: 'test-agent' })).id;
    await mannaService(prismaMannaStore(t.db)).grant('alice', '10', 'forever');
  });

  /** A session whose prompt is answered by a reply `streaming` on `instance`, with a paid tool running and one pending. */
  async function abandoned(instance: string, content: string) {
    const session = await t.db.session.create({ data: { ownerId: alice.id } });
    const prompt = await t.db.message.create({ data: { sessionId: session.id, role: 'user', senderId: alice.id, content: 'go' } });
    const reply = await t.db.message.create({
      data: { sessionId: session.id, role: 'assistant', senderId: agentId, promptId: prompt.id, status: 'streaming', content, instance },
    });
    const running = await t.db.$transaction(async (tx) => {
      const call = await tx.task.create({
        data: { userId: alice.id, sessionId: session.id, messageId: reply.id, position: 0, tool: 'flux_dev', status: 'running', cost: 1 },
      });
      await tx.session.update({ where: { id: session.id }, data: { mannaSpent: { increment: 1 } } });
      await debit(tx, alice.id, new Prisma.Decimal(1), {
        reason: 'tool: flux_dev',
        sessionId: session.id,
        messageId: reply.id,
        taskId: call.id,
      });
      return call;
    });
    const pending = await t.db.task.create({
      data: { userId: alice.id, sessionId: session.id, messageId: reply.id, position: 1, tool: 'flux_dev' },
    });
    return { sessionId: session.id, promptId: prompt.id, replyId: reply.id, running: running.id, pending: pending.id };
  }

  const balance = async () => (await t.db.user.findUniqueOrThrow({ where: { id: alice.id } })).foreverBalance.toNumber();

  it('closes the replies of one instance exactly once when several instances run it at once, and refunds each hold once', async () => {
    const gone = [await abandoned('gone', 'Half a'), await abandoned('gone', 'Another half')];
    const alive = await abandoned('alive', 'Still writing');
    const watcher = bus.subscribe(gone[0]!.sessionId);
    expect(await balance()).toBe(7);

    const runs = await Promise.all(
      Array.from({ length: 4 }, () => recoverAbandonedReplies(recoveryStore(t.db), { instanceId: 'gone', bus: bus })),
    );
    const recovered = runs.flat();
    expect(recovered.map((r) => r.message.id).sort()).toEqual(gone.map((g) => g.replyId).sort());

    for (const g of gone) {
      const reply = await t.db.message.findUniqueOrThrow({
        where: { id: g.replyId },
        include: { toolCalls: { orderBy: { position: 'asc' } } },
      });
      expect(reply).toMatchObject({ status: 'failed', error: ABANDONED_REPLY });
      expect(reply.toolCalls.map((c) => c.status)).toEqual(['cancelled', 'cancelled']);
      const rows = await t.db.mannaLedger.findMany({ where: { taskId: g.running }, orderBy: { createdAt: 'asc' } });
      expect(rows.map((r) => [r.amount.toNumber(), r.reason])).toEqual([
        [-1, 'tool: flux_dev'],
        [1, 'refund: flux_dev cancelled'],
      ]);
      expect((await t.db.session.findUniqueOrThrow({ where: { id: g.sessionId } })).mannaSpent.toNumber()).toBe(0);
    }
    expect(await t.db.message.findUniqueOrThrow({ where: { id: alive.replyId } })).toMatchObject({
      status: 'streaming',
      content: 'Still writing',
    });
    expect(await t.db.task.findUniqueOrThrow({ where: { id: alive.running } })).toMatchObject({ status: 'running' });
    expect(await balance()).toBe(9);

    // Watchers of the session (on any instance sharing the bus) see the reply fail and the prompt end.
    const first = await watcher.next();
    const second = await watcher.next();
    watcher.close();
    expect(first.value).toMatchObject({
      type: 'error',
      promptId: gone[0]!.promptId,
      error: ABANDONED_REPLY,
      message: { id: gone[0]!.replyId, status: 'failed', content: 'Half a' },
    });
    expect(second.value).toMatchObject({ type: 'end_prompt', promptId: gone[0]!.promptId });
  });

  it('with olderThan, leaves replies saved since then alone', async () => {
    const old = await abandoned('elsewhere', 'Old');
    const recent = await abandoned('elsewhere', 'Recent');
    await t.db.$executeRaw`UPDATE "Message" SET "updatedAt" = now() - interval '10 minutes' WHERE "id" = ${old.replyId}`;

    const recovered = await recoverAbandonedReplies(recoveryStore(t.db), { olderThan: new Date(Date.now() - 60_000) });
    expect(recovered.map((r) => r.message.id)).toEqual([old.replyId]);
    expect((await t.db.message.findUniqueOrThrow({ where: { id: recent.replyId } })).status).toBe('streaming');
  });

  it('without options, closes every streaming reply (one instance, at start-up)', async () => {
    const recovered = await recoverAbandonedReplies(recoveryStore(t.db));
    expect(recovered.length).toBeGreaterThan(0);
    expect(await t.db.message.count({ where: { status: 'streaming' } })).toBe(0);
    expect(await t.db.task.count({ where: { status: { in: ['running', 'pending'] } } })).toBe(0);
    expect(await balance()).toBe(10);
    expect(await recoverAbandonedReplies(recoveryStore(t.db))).toEqual([]);
  });
});
