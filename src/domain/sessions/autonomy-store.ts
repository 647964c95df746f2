import type { Db } from '../../db/database.ts';
import type { ActorSelection } from '../../generated/prisma/enums.ts';
import type { Budget } from '../core/budgets.ts';
import { newId } from '../core/ids.ts';
import { reserveTurns } from '../manna/stores/session-budgets.ts';
import { insertMessages } from '../replies/message-store.ts';
import type { Target } from '../replies/runtime.ts';
import type { SessionAgent } from './store.ts';

/** What the autonomy rules decide a session's next step from (`autonomy.ts`). */
export interface AutonomyState {
  autoReply: boolean;
  replyInterval: number;
  actorSelection: ActorSelection;
  ownerId: string;
  /** The session's agents in order, with who may use each. */
  agents: SessionAgent[];
  /** The agent that wrote the latest reply, if any. */
  lastSpeakerId: string | null;
  /** When the latest finished user message or reply was last written; null for none. */
  lastActivityAt: Date | null;
  /** A reply is being written in the session. */
  replying: boolean;
  budget: { turns: number | null; tokens: number | null; manna: number | null };
  spent: { turns: number; tokens: number; manna: number };
}

/** A session's autonomy as a change of it needs to know: is it on, and is there a budget to bound it. */
export interface AutonomyStanding {
  autoReply: boolean;
  budgeted: boolean;
}

/** What `startTurn` did: the turn's reply placeholder, or why it did not start. */
export type TurnStart = { started: Target } | { busy: true } | { stopped: Budget };

/** Every statement of the autonomy rules. */
export interface AutonomyStore {
  /** Null when the session is gone (or has never had autonomy settings). */
  state(sessionId: string): Promise<AutonomyState | null>;
  standing(sessionId: string): Promise<AutonomyStanding | null>;
  /**
   * In one transaction: spends a turn of the session's budget, then, when no reply is being
   * written, saves the agent's placeholder reply (its own prompt: `promptId` is its id) for
   * `instance` to write. A budget with no room stops it; a reply under way makes it `busy`
   * (the turn is not spent).
   */
  startTurn(sessionId: string, agentId: string, instance: string): Promise<TurnStart>;
  /** Sets auto-reply off if it is on; whether it was. */
  turnOff(sessionId: string): Promise<boolean>;
  /** How the reply ended, and its error. */
  replyOutcome(messageId: string): Promise<{ status: string; error: string | null } | null>;
}

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

    async turnOff(sessionId) {
      const changed =
        await db.$executeRaw`UPDATE "Session" SET "autoReply" = false, "updatedAt" = now() WHERE "id" = ${sessionId} AND "autoReply"`;
      return changed === 1;
    },

    replyOutcome: (messageId) => db.message.findUnique({ where: { id: messageId }, select: { status: true, error: true } }),
  };
}
