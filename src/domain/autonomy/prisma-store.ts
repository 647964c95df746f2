import type { Db } from '../../db/database.ts';
import { newId } from '../core/ids.ts';
import { reserveTurns } from '../manna/stores/session-budgets.ts';
import { insertMessages } from '../replies/message-store.ts';
import { turnOffAutoReply } from '../sessions/prisma-store.ts';
import type { AutonomyStore } from './store.ts';
import { recordWebhookEvent } from '../webhooks/index.ts';

class Busy extends Error {}

export function prismaAutonomyStore(db: Db): AutonomyStore {
  return {
    async state(sessionId) {
      const s = await db.session.findUnique({
        where: { id: sessionId },
        select: {
          ownerId: true,
          autoReply: true,
          replyInterval: true,
          actorSelection: true,
          turnBudget: true,
          tokenBudget: true,
          mannaBudget: true,
          turnsSpent: true,
          tokensSpent: true,
          mannaSpent: true,
          agents: {
            orderBy: { position: 'asc' },
            select: { agent: { select: { id: true, name: true, public: true, ownerId: true, user: { select: { username: true } } } } },
          },
        },
      });
      if (!s || s.autoReply === null || s.replyInterval === null || s.actorSelection === null) return null;
      const [activity] = await db.$queryRaw<{ last_speaker: string | null; last_activity: Date | null; replying: boolean }[]>`
        SELECT
          (SELECT "senderId" FROM "Message" WHERE "sessionId" = ${sessionId} AND "role" = 'assistant'
             ORDER BY "ordinal" DESC LIMIT 1) AS last_speaker,
          (SELECT max("updatedAt") FROM "Message" WHERE "sessionId" = ${sessionId} AND "role" IN ('user', 'assistant')
             AND "status" <> 'streaming') AS last_activity,
          EXISTS (SELECT 1 FROM "Message" WHERE "sessionId" = ${sessionId} AND "status" = 'streaming') AS replying`;
      return {
        autoReply: s.autoReply,
        replyInterval: s.replyInterval,
        actorSelection: s.actorSelection,
        ownerId: s.ownerId,
        agents: s.agents.map(({ agent: { user, ...agent } }) => ({ ...agent, key: user.username })),
        lastSpeakerId: activity?.last_speaker ?? null,
        lastActivityAt: activity?.last_activity ? new Date(activity.last_activity) : null,
        replying: activity?.replying ?? false,
        budget: { turns: s.turnBudget, tokens: s.tokenBudget, manna: s.mannaBudget?.toNumber() ?? null },
        spent: { turns: s.turnsSpent, tokens: s.tokensSpent, manna: s.mannaSpent.toNumber() },
      };
    },

    async standing(sessionId) {
      const s = await db.session.findUnique({
        where: { id: sessionId },
        select: { autoReply: true, turnBudget: true, tokenBudget: true, mannaBudget: true },
      });
      if (!s) return null;
      return { autoReply: s.autoReply === true, budgeted: s.turnBudget !== null || s.tokenBudget !== null || s.mannaBudget !== null };
    },

    async startTurn(sessionId, agentId, instance) {
      try {
        return await db.$transaction(async (tx) => {
          // The conditional UPDATE locks the session row: a prompt saved meanwhile (which spends
          // turns the same way) either committed before, and its reply is seen here, or waits.
          const stopped = await reserveTurns(tx, sessionId, 1);
          if (stopped) return { stopped };
          const [streaming] = await tx.$queryRaw<{ any: boolean }[]>`
            SELECT EXISTS (SELECT 1 FROM "Message" WHERE "sessionId" = ${sessionId} AND "status" = 'streaming') AS "any"`;
          // Thrown to roll back the turn just spent.
          if (streaming?.any) throw new Busy();
          const id = newId();
          const [reply] = await insertMessages(tx, [
            { id, sessionId, role: 'assistant', senderId: agentId, promptId: id, status: 'streaming', instance },
          ]);
          return { started: { messageId: reply!.id, agentId, ordinal: reply!.ordinal, createdAt: reply!.createdAt } };
        });
      } catch (e) {
        if (e instanceof Busy) return { busy: true };
        throw e;
      }
    },

    // The session's row is its owner's to write: sessions/ turns the setting off.
    turnOff: (sessionId, reason, detail) =>
      db.$transaction(async (tx) => {
        if (!(await turnOffAutoReply(tx, sessionId))) return false;
        const session = await tx.session.findUnique({ where: { id: sessionId }, select: { ownerId: true } });
        // The owner who turned it off knows; a stop of the service's own (a budget, a failure) is news.
        if (session && reason !== 'turned_off')
          await recordWebhookEvent(tx, {
            userId: session.ownerId,
            type: 'autonomy.stopped',
            data: { session_id: sessionId, reason, detail },
          });
        return true;
      }),

    replyOutcome: (messageId) => db.message.findUnique({ where: { id: messageId }, select: { status: true, error: true } }),
  };
}
