import type { Db } from '../../db/database.ts';
import { Prisma } from '../../generated/prisma/client.ts';
import { abandonToolCalls } from '../tasks/settle-store.ts';
import { messageSelect, toMessageView } from '../core/stores/message-rows.ts';
import type { AbandonedReplies, RecoveryStore } from './ports.ts';

/** Replies being written that `which` takes; one paused for approval is written by no process, so none left it. */
const streaming = (which: AbandonedReplies): Prisma.MessageWhereInput => ({
  status: 'streaming',
  resumeState: { equals: Prisma.DbNull },
  ...(which.instanceId !== undefined ? { instance: which.instanceId } : {}),
  ...(which.olderThan ? { updatedAt: { lt: which.olderThan } } : {}),
});

/** Recovery's statements on Prisma. */
export function recoveryStore(db: Db): RecoveryStore {
  return {
    async sessionsWithAbandoned(which, take) {
      const sessions = await db.message.findMany({ where: streaming(which), distinct: ['sessionId'], select: { sessionId: true }, take });
      return sessions.map((s) => s.sessionId);
    },

    closeAbandoned: (sessionId, which, errors) =>
      db.$transaction(async (tx) => {
        const [session] = await tx.$queryRaw<{ id: string }[]>`SELECT "id" FROM "Session" WHERE "id" = ${sessionId} FOR UPDATE`;
        if (!session) return [];
        const closed = await tx.message.updateManyAndReturn({
          where: { ...streaming(which), sessionId },
          data: { status: 'failed', error: errors.reply },
          select: { id: true },
        });
        if (closed.length === 0) return [];
        const ids = closed.map((m) => m.id);
        await abandonToolCalls(tx, { messageId: { in: ids } }, errors.tool);
        const rows = await tx.message.findMany({ where: { id: { in: ids } }, orderBy: { ordinal: 'asc' }, select: messageSelect });
        return rows.map((m) => ({ sessionId, promptId: m.promptId, agentId: m.senderId, message: toMessageView(m) }));
      }),

    async streamingInstances(self) {
      const writers = await db.message.findMany({
        where: { status: 'streaming', instance: { not: self } },
        distinct: ['instance'],
        select: { instance: true },
      });
      return writers.flatMap((w) => (w.instance ? [w.instance] : []));
    },
  };
}
