import type { Db } from '../../db/database.ts';
import { numberedByBytes, rowsThatFit } from '../core/byte-pages.ts';
import { Prisma } from '../../generated/prisma/client.ts';
import { releaseHolds } from '../tasks/settle-store.ts';
import { messageSelect, toMessageView } from '../core/stores/message-rows.ts';
import { isUniqueViolation } from '../core/stores/prisma-errors.ts';
import { recalledFacts } from '../memories/service.ts';
import { memoriesOf } from '../memories/store.ts';
import type { Title } from '../replies/ports.ts';
import { prismaAccessStore } from '../access/prisma-store.ts';
import { newSessionWriter, savePrompt } from './prompt-store.ts';
import { recordSignal } from '../signals/prisma-store.ts';
import {
  type AgentAsk,
  type MessageSlice,
  type MessageWindow,
  type NewSessionAgent,
  PromptSavedAlready,
  ReactionLimitReached,
  type SessionFilter,
  type SessionQuery,
  type SessionRead,
  type SessionStore,
} from './store.ts';

/**
 * Prisma cannot name the row type of a query passed through generically: this is where it is
 * named, once, for every session read.
 */
const asRead = <Q extends SessionQuery>(row: unknown) => row as SessionRead<Q>;

/** Newest activity first; the id breaks ties. */
const byActivity = [{ updatedAt: 'desc' as const }, { id: 'desc' as const }];

function sessionsWhere(filter: SessionFilter): Prisma.SessionWhereInput {
  if ('ownedBy' in filter) return { ownerId: filter.ownedBy };
  if ('sharedWith' in filter) return { ownerId: { not: filter.sharedWith }, users: { some: { userId: filter.sharedWith } } };
  const { memberOf, agentId } = filter;
  return {
    OR: [{ ownerId: memberOf }, { users: { some: { userId: memberOf } } }],
    ...(agentId !== undefined ? { agents: { some: { agentId } } } : {}),
  };
}

/**
 * A page of the session's messages, oldest first. Their sizes are read first, so a page of huge
 * messages is cut short before their text is read at all.
 */
async function messagePage(client: Pick<Db, 'message' | '$queryRaw'>, sessionId: string, w: MessageWindow): Promise<MessageSlice> {
  const sizes = await client.$queryRaw<{ ordinal: number; bytes: number }[]>`
    SELECT "ordinal", octet_length("content") + coalesce(octet_length("thought"), 0) AS "bytes" FROM "Message"
    WHERE "sessionId" = ${sessionId}
      ${w.after !== null ? Prisma.sql`AND "ordinal" > ${w.after}` : Prisma.empty}
      ${w.before !== null ? Prisma.sql`AND "ordinal" < ${w.before}` : Prisma.empty}
    ORDER BY "ordinal" ${w.forwards ? Prisma.sql`ASC` : Prisma.sql`DESC`} LIMIT ${w.take + 1}`;
  const fits = rowsThatFit(
    sizes.map((s) => Number(s.bytes)),
    w.take,
    w.maxBytes,
  );
  const ordinals = sizes.slice(0, fits).map((s) => Number(s.ordinal));
  const rows = ordinals.length
    ? await client.message.findMany({ where: { sessionId, ordinal: { in: ordinals } }, orderBy: { ordinal: 'asc' }, select: messageSelect })
    : [];
  return { messages: rows.map(toMessageView), more: sizes.length > fits };
}

/**
 * Bytes a session takes in a list, roughly as REST writes it (`GET /v2/sessions`, `GET /v2/threads`):
 * its title and scenario, each of its agents with its description, each member, the rest.
 */
const SESSION_BYTES = Prisma.sql`coalesce(octet_length(s."title"), 0) + coalesce(octet_length(s."scenario"), 0) + 1500
  + coalesce((SELECT sum(octet_length(a."name") + octet_length(a."description") + 400) FROM "SessionAgent" sa
      JOIN "Agent" a ON a."id" = sa."agentId" WHERE sa."sessionId" = s."id"), 0)
  + 300 * (SELECT count(*) FROM "SessionUser" su WHERE su."sessionId" = s."id")`;

/**
 * The agents new sessions' prompts name, with what each remembers of the users whose prompts
 * will be answered, in one statement for all the asks.
 */
async function agentsForNewSessions(db: Db, asks: readonly AgentAsk[]) {
  const users = [...new Set(asks.filter((k) => k.recall).map((k) => k.userId))];
  const rows = await db.agent.findMany({
    where: { id: { in: [...new Set(asks.map((k) => k.agentId))] } },
    include: {
      user: { select: { username: true } },
      _count: { select: { mcpTools: true } },
      ...(users.length ? { memories: memoriesOf(users) } : {}),
    },
  });
  const byId = new Map(rows.map((r) => [r.id, r as typeof r & { memories?: { fact: string; userId: string }[] }]));
  const reads = new Map<AgentAsk, NewSessionAgent>();
  for (const ask of asks) {
    const row = byId.get(ask.agentId);
    if (!row) continue;
    const { memories, _count, ...agent } = row;
    reads.set(ask, {
      agent: { ...agent, mcpTools: _count.mcpTools },
      memories: ask.recall && memories ? recalledFacts(memories, ask.userId) : undefined,
    });
  }
  return reads;
}

/** Which agents answer, and saving prompts. */
function promptStatements(
  db: Db,
): Pick<SessionStore, 'sessionAgents' | 'agentsForNewSessions' | 'addPrompt' | 'createSession' | 'updateSettings' | 'settingsOf'> {
  const saveInNewSession = newSessionWriter(db);
  return {
    async sessionAgents(sessionId) {
      const rows = await db.sessionAgent.findMany({
        where: { sessionId },
        orderBy: { position: 'asc' },
        select: { agent: { select: { id: true, name: true, public: true, ownerId: true, user: { select: { username: true } } } } },
      });
      return rows.map(({ agent: { user, ...agent } }) => ({ ...agent, key: user.username }));
    },

    agentsForNewSessions: (asks) => agentsForNewSessions(db, asks),
    addPrompt: (p) =>
      db
        .$transaction((tx) => savePrompt(tx, p))
        .catch((e: unknown) => {
          // Only a relayed prompt names its own id: the same one saved twice is the store's answer, not a fault.
          throw p.promptId && isUniqueViolation(e) ? new PromptSavedAlready() : e;
        }),
    createSession: (p) => saveInNewSession(p),
    async updateSettings(sessionId, settings) {
      await db.session.update({ where: { id: sessionId }, data: settings, select: { id: true } });
    },
    settingsOf: (sessionId) => db.session.findUnique({ where: { id: sessionId }, select: { title: true, scenario: true } }),
  };
}

/** Sessions and their messages, as readers page through them. */
function readStatements(
  db: Db,
): Pick<SessionStore, 'session' | 'sessions' | 'numberedSessions' | 'userNamed' | 'message' | 'messages' | 'sessionWithMessages'> {
  return {
    async session(id, query) {
      return asRead<typeof query>(await db.session.findUniqueOrThrow({ where: { id }, ...query }));
    },

    async sessions(filter, { from, limit }, query) {
      const where = sessionsWhere(filter);
      const rows = await db.session.findMany({
        where: from
          ? { AND: [where, { OR: [{ updatedAt: { lt: from.updatedAt } }, { updatedAt: from.updatedAt, id: { lt: from.id } }] }] }
          : where,
        orderBy: byActivity,
        take: limit + 1,
        ...query,
      });
      const sessions = rows.slice(0, limit);
      const last = sessions.at(-1) as { updatedAt: Date; id: string } | undefined;
      return { sessions: sessions.map(asRead<typeof query>), next: rows.length > limit && last ? last : null };
    },

    numberedSessions: (filter, window, query) =>
      db.$transaction(async (tx) => {
        const where = sessionsWhere(filter);
        const { rows, total, cut } = await numberedByBytes(window, {
          ids: async () => (await tx.session.findMany({ where, orderBy: byActivity, select: { id: true } })).map((r) => r.id),
          sizes: async (ids) =>
            new Map(
              (
                await tx.$queryRaw<{ id: string; bytes: number }[]>`SELECT s."id", (${SESSION_BYTES})::int AS "bytes" FROM "Session" s
                WHERE s."id" = ANY(${ids}::text[])`
              ).map((r) => [r.id, Number(r.bytes)]),
            ),
          rows: (ids) => tx.session.findMany({ where: { id: { in: ids } }, ...query }),
        });
        return { sessions: rows.map(asRead<typeof query>), total, cut };
      }),

    userNamed: (username) => db.user.findUnique({ where: { username }, select: { id: true, type: true } }),

    async message(id) {
      const row = await db.message.findUnique({ where: { id }, select: messageSelect });
      return row && toMessageView(row);
    },

    messages: (sessionId, window) => messagePage(db, sessionId, window),

    sessionWithMessages: (id, query, window) =>
      db.$transaction(
        async (tx) => {
          const session = asRead<typeof query>(await tx.session.findUniqueOrThrow({ where: { id }, ...query }));
          return { session, page: await messagePage(tx, id, window) };
        },
        { isolationLevel: 'RepeatableRead' },
      ),
  };
}

/** Reactions, cancelling, and the changes to who is in a session, each write its own transaction. */
function changeStatements(
  db: Db,
): Pick<
  SessionStore,
  'sessionOfMessage' | 'toggleReaction' | 'reactionsOf' | 'promptsAnswering' | 'deleteSession' | 'ownerOf' | 'setMember' | 'removeMember'
> {
  return {
    async sessionOfMessage(messageId) {
      const message = await db.message.findUnique({ where: { id: messageId }, select: { sessionId: true } });
      return message?.sessionId ?? null;
    },

    toggleReaction: ({ messageId, userId, reaction, replaces, limit }) =>
      db.$transaction(async (tx) => {
        // One user's reactions to one message queue here, so concurrent ones cannot pass the cap.
        await tx.$queryRaw`SELECT 1 FROM "Message" WHERE "id" = ${messageId} FOR UPDATE`;
        const mine = { messageId, userId };
        const { count: removed } = await tx.reaction.deleteMany({ where: { ...mine, reaction } });
        if (!removed) {
          if (replaces) await tx.reaction.deleteMany({ where: { ...mine, reaction: replaces } });
          // Thrown inside the transaction, so the reaction taken off above comes back.
          if ((await tx.reaction.count({ where: mine })) >= limit) throw new ReactionLimitReached();
          await tx.reaction.createMany({ data: [{ ...mine, reaction }], skipDuplicates: true });
        }
        const reactions = await tx.reaction.findMany({
          where: { messageId },
          select: { userId: true, reaction: true },
          orderBy: { createdAt: 'asc' },
        });
        return { added: !removed, reactions };
      }),

    async reactionsOf(messageId, userId) {
      const rows = await db.reaction.findMany({
        where: { messageId, userId, message: { session: { OR: [{ ownerId: userId }, { users: { some: { userId } } }] } } },
        select: { reaction: true },
      });
      return rows.map((r) => r.reaction);
    },

    async promptsAnswering(sessionId, promptId) {
      const prompts = await db.message.findMany({
        where: { sessionId, status: 'streaming', role: 'assistant', ...(promptId !== undefined ? { promptId } : {}) },
        distinct: ['promptId'],
        select: { promptId: true },
      });
      return prompts.length;
    },

    deleteSession: (id, signal) =>
      db.$transaction(async (tx) => {
        // Locked first: a tool call being charged now either commits before (and is refunded
        // here) or finds the session gone (and charges nothing).
        await tx.$queryRaw`SELECT 1 FROM "Session" WHERE "id" = ${id} FOR UPDATE`;
        await releaseHolds(tx, { message: { sessionId: id } }, 'The session was deleted');
        await tx.session.deleteMany({ where: { id } });
        return recordSignal(tx, signal);
      }),

    async ownerOf(sessionId) {
      return (await db.session.findUniqueOrThrow({ where: { id: sessionId }, select: { ownerId: true } })).ownerId;
    },

    async setMember(sessionId, userId, permission) {
      await db.sessionUser.upsert({
        where: { sessionId_userId: { sessionId, userId } },
        create: { sessionId, userId, permission },
        update: { permission },
      });
    },

    removeMember: (sessionId, userId, signal) =>
      db.$transaction(async (tx) => {
        const { count } = await tx.sessionUser.deleteMany({ where: { sessionId, userId } });
        return count ? recordSignal(tx, signal) : null;
      }),
  };
}

/** The session rules' statements (`store.ts` says what each must do), on Prisma. */
export function prismaSessionStore(db: Db): SessionStore {
  return { ...prismaAccessStore(db), ...promptStatements(db), ...readStatements(db), ...changeStatements(db) };
}

/**
 * Names sessions after their first exchange, for the reply writer (which sits below sessions and
 * is handed this): only a session still without a title is named, so a title its owner set
 * meanwhile stays. Returns the sessions named.
 */
export function sessionTitles(db: Db) {
  return {
    async nameSessions(group: readonly Title[]) {
      const named = await db.$queryRaw<{ id: string }[]>`
        UPDATE "Session" AS s SET "title" = v.title, "updatedAt" = now()
        FROM (
          SELECT DISTINCT ON (id) id, title
          FROM unnest(${group.map((t) => t.sessionId)}::text[], ${group.map((t) => t.title)}::text[]) WITH ORDINALITY AS v(id, title, n)
          ORDER BY id, n
        ) AS v
        WHERE s."id" = v.id AND s."title" IS NULL
        RETURNING s."id"`;
      return new Set(named.map((r) => r.id));
    },
  };
}

/**
 * Turns a session's auto-reply off if it is on, for the autonomy rules (which sit above sessions
 * and stop their loop with it); whether it was on.
 */
export async function turnOffAutoReply(db: Db | Prisma.TransactionClient, sessionId: string): Promise<boolean> {
  const changed =
    await db.$executeRaw`UPDATE "Session" SET "autoReply" = false, "updatedAt" = now() WHERE "id" = ${sessionId} AND "autoReply"`;
  return changed === 1;
}
