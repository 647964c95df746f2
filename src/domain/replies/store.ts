import type { Db } from '../../db/database.ts';
import { addTokens, reserveTurns } from '../manna/stores/session-budgets.ts';
import { abandonToolCalls } from '../manna/stores/holds.ts';
import { messageSelect, toMessageView } from '../core/stores/message-rows.ts';
import type { Checkpoint, Completion, Conversation, ReplyStore, Title } from './ports.ts';

/** The reply engine's statements on Prisma: the reads a prompt's replies start from, and each save. */
export function replyStore(db: Db): ReplyStore {
  return {
    async conversation(sessionId, historyLimit): Promise<Conversation | null> {
      const [session, latest] = await Promise.all([
        db.session.findUnique({
          where: { id: sessionId },
          select: {
            scenario: true,
            agents: { orderBy: { position: 'asc' }, select: { agent: { include: { user: { select: { username: true } } } } } },
          },
        }),
        db.message.findMany({
          where: { sessionId, status: { not: 'streaming' } },
          orderBy: { ordinal: 'desc' },
          take: historyLimit,
          select: { ...messageSelect, sender: { select: { username: true } } },
        }),
      ]);
      if (!session) return null;
      return {
        scenario: session.scenario,
        agents: session.agents.map((s) => s.agent),
        history: latest.reverse().map(({ sender, ...m }) => ({ message: toMessageView(m), senderName: sender?.username ?? null })),
      };
    },

    reserveTurn: (sessionId, pendingTokens) => reserveTurns(db, sessionId, 1, pendingTokens),

    async saveText(messageId, content) {
      return toMessageView(await db.message.update({ where: { id: messageId }, data: { content }, select: messageSelect }));
    },

    closeReply: (sessionId, messageId, outcome, toolError) =>
      db.$transaction(async (tx) => {
        await addTokens(tx, sessionId, outcome.promptTokens + outcome.completionTokens);
        await abandonToolCalls(tx, { messageId }, toolError);
        const row = await tx.message.update({
          where: { id: messageId },
          data: {
            content: outcome.content,
            thought: outcome.thought || null,
            status: outcome.status,
            error: outcome.error,
            promptTokens: outcome.promptTokens,
            completionTokens: outcome.completionTokens,
          },
          select: messageSelect,
        });
        return toMessageView(row);
      }),

    saveCheckpoints: (group) => saveCheckpoints(db, group),
    saveCompletions: (group) => saveCompletions(db, group),
    nameSessions: (group) => nameSessions(db, group),
  };
}

async function saveCheckpoints(db: Db, group: Checkpoint[]) {
  await db.$executeRaw`
    UPDATE "Message" AS m SET "content" = v.content, "thought" = NULLIF(v.thought, ''), "updatedAt" = now()
    FROM unnest(${group.map((c) => c.messageId)}::text[], ${group.map((c) => c.content)}::text[], ${group.map((c) => c.thought)}::text[])
      AS v(id, content, thought)
    WHERE m."id" = v.id AND m."status" = 'streaming'`;
}

async function saveCompletions(db: Db, e: Completion[]) {
  // The session's counter before the message, in the order a session delete takes them (the
  // message update reads the counter update's rows, so it runs after it). Only replies still
  // streaming are counted: a save made again (a group retried reply by reply) counts nothing twice.
  const saved = await db.$queryRaw<{ id: string }[]>`
    WITH v AS (
      SELECT * FROM unnest(
        ${e.map((c) => c.messageId)}::text[], ${e.map((c) => c.sessionId)}::text[], ${e.map((c) => c.content)}::text[],
        ${e.map((c) => c.thought)}::text[], ${e.map((c) => c.promptTokens)}::int[], ${e.map((c) => c.completionTokens)}::int[]
      ) AS v(id, session_id, content, thought, prompt_tokens, completion_tokens)
    ), counted AS (
      UPDATE "Session" AS s SET "tokensSpent" = s."tokensSpent" + t.n, "updatedAt" = now()
      FROM (
        SELECT v.session_id, sum(v.prompt_tokens + v.completion_tokens)::int AS n
        FROM v JOIN "Message" AS m ON m."id" = v.id AND m."status" = 'streaming'
        GROUP BY v.session_id
      ) AS t
      WHERE s."id" = t.session_id
      RETURNING s."id"
    )
    UPDATE "Message" AS m SET "content" = v.content, "thought" = NULLIF(v.thought, ''), "status" = 'complete', "error" = NULL,
      "promptTokens" = v.prompt_tokens, "completionTokens" = v.completion_tokens, "updatedAt" = now()
    FROM v
    WHERE m."id" = v.id AND m."status" = 'streaming' AND m."sessionId" IN (SELECT "id" FROM counted)
    RETURNING m."id"`;
  const rows = saved.length ? await db.message.findMany({ where: { id: { in: saved.map((r) => r.id) } }, select: messageSelect }) : [];
  return new Map(rows.map((r) => [r.id, toMessageView(r)]));
}

async function nameSessions(db: Db, group: Title[]) {
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
}
