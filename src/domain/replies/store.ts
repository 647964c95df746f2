import { recordWebhookEvent, recordWebhookEvents, type WebhookEventInput } from '../webhooks/index.ts';
import type { Db } from '../../db/database.ts';
import { addTokens, countReplyTokens, reserveTurns } from '../manna/stores/session-budgets.ts';
import { abandonToolCalls } from '../tasks/settle-store.ts';
import { messageSelect, toMessageView } from '../core/stores/message-rows.ts';
import type { Prisma } from '../../generated/prisma/client.ts';
import type { Checkpoint, Completion, Conversation, PromptOutcomes, ReplyStore } from './ports.ts';
import type { PausedReply } from './runtime.ts';

/**
 * The reply engine's statements on Prisma: the reads a prompt's replies start from, and each
 * save. A session's title is the sessions' store's to write (`sessions` sits above `replies`, so
 * the composition hands that statement in).
 */
export function replyStore(db: Db, sessions: Pick<ReplyStore, 'nameSessions'>): ReplyStore {
  return {
    async conversation(sessionId, historyLimit): Promise<Conversation | null> {
      const [session, latest] = await Promise.all([
        db.session.findUnique({
          where: { id: sessionId },
          select: {
            scenario: true,
            agents: {
              orderBy: { position: 'asc' },
              select: { agent: { include: { user: { select: { username: true } }, _count: { select: { mcpTools: true } } } } },
            },
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
        agents: session.agents.map(({ agent: { _count, ...agent } }) => ({ ...agent, mcpTools: _count.mcpTools })),
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
        const session = await tx.session.findUnique({ where: { id: sessionId }, select: { ownerId: true } });
        if (session && (row.status === 'complete' || row.status === 'failed'))
          await recordWebhookEvent(tx, replyEvent(session.ownerId, row));
        return toMessageView(row);
      }),

    removeReply: (sessionId, messageId, tokens, toolError) =>
      db.$transaction(async (tx) => {
        await addTokens(tx, sessionId, tokens);
        await abandonToolCalls(tx, { messageId }, toolError);
        // Its ledger rows stay (their link to the message cleared), as a deleted session's do.
        return (await tx.message.deleteMany({ where: { id: messageId, status: 'streaming' } })).count > 0;
      }),

    async stillWriting(messageIds) {
      const rows = await db.message.findMany({ where: { id: { in: messageIds }, status: 'streaming' }, select: { id: true } });
      return rows.map((r) => r.id);
    },

    async stopRequested(messageId) {
      const row = await db.message.findUnique({ where: { id: messageId }, select: { status: true, stopRequest: true } });
      return row?.status === 'streaming' ? row.stopRequest : null;
    },

    async pause(messageId, content, state) {
      // Not a reply a newer prompt asked to stop: that one ends as asked instead.
      const { count } = await db.message.updateMany({
        where: { id: messageId, status: 'streaming', stopRequest: null },
        data: { content, resumeState: state as unknown as Prisma.InputJsonValue, instance: null },
      });
      if (count === 0) return null;
      return toMessageView(await db.message.findUniqueOrThrow({ where: { id: messageId }, select: messageSelect }));
    },

    async claimPaused(messageId, instance) {
      // One statement, so of the instances that take the same reply's job, one goes on with it.
      const [row] = await db.$queryRaw<{ resumeState: PausedReply }[]>`
        UPDATE "Message" AS m SET "resumeState" = NULL, "instance" = ${instance}, "updatedAt" = now()
        FROM "Message" AS before
        WHERE before."id" = m."id" AND m."id" = ${messageId} AND m."status" = 'streaming' AND m."resumeState" IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM "Task" WHERE "messageId" = ${messageId} AND "status" = 'awaiting_approval')
        RETURNING before."resumeState" AS "resumeState"`;
      return row?.resumeState ?? null;
    },

    async claimPausedIn(sessionId, promptId, instance) {
      const rows = await db.$queryRaw<{ resumeState: PausedReply }[]>`
        UPDATE "Message" AS m SET "resumeState" = NULL, "instance" = ${instance}, "updatedAt" = now()
        FROM "Message" AS before
        WHERE before."id" = m."id" AND m."sessionId" = ${sessionId} AND m."status" = 'streaming' AND m."resumeState" IS NOT NULL
          AND (${promptId ?? null}::text IS NULL OR m."promptId" = ${promptId ?? null})
        RETURNING before."resumeState" AS "resumeState"`;
      return rows.map((r) => r.resumeState);
    },

    saveCheckpoints: (group) => saveCheckpoints(db, group),
    saveCompletions: (group) => saveCompletions(db, group),
    nameSessions: (group) => sessions.nameSessions(group),
  };
}

async function saveCheckpoints(db: Db, group: Checkpoint[]) {
  await db.$executeRaw`
    UPDATE "Message" AS m SET "content" = v.content, "thought" = NULLIF(v.thought, ''), "updatedAt" = now()
    FROM unnest(${group.map((c) => c.messageId)}::text[], ${group.map((c) => c.content)}::text[], ${group.map((c) => c.thought)}::text[])
      AS v(id, content, thought)
    WHERE m."id" = v.id AND m."status" = 'streaming'`;
}

/** A reply's end for the session owner's webhooks: its ids (the message is added as REST shows it, before the first try). */
const replyEvent = (ownerId: string, m: { id: string; sessionId: string; senderId: string | null; status: string }): WebhookEventInput => ({
  userId: ownerId,
  type: m.status === 'complete' ? 'reply.completed' : 'reply.failed',
  data: { session_id: m.sessionId, message_id: m.id, sender_id: m.senderId },
});

async function saveCompletions(db: Db, e: Completion[]) {
  const saved = await db.$transaction(async (tx) => {
    // The sessions' counters first (see countReplyTokens); a reply of a session deleted meanwhile is not saved.
    const counted = await countReplyTokens(
      tx,
      e.map((c) => ({ messageId: c.messageId, tokens: c.promptTokens + c.completionTokens })),
    );
    if (!counted.length) return [];
    const updated = await tx.$queryRaw<{ id: string }[]>`
      UPDATE "Message" AS m SET "content" = v.content, "thought" = NULLIF(v.thought, ''), "status" = 'complete', "error" = NULL,
        "promptTokens" = v.prompt_tokens, "completionTokens" = v.completion_tokens, "updatedAt" = now()
      FROM unnest(
        ${e.map((c) => c.messageId)}::text[], ${e.map((c) => c.content)}::text[], ${e.map((c) => c.thought)}::text[],
        ${e.map((c) => c.promptTokens)}::int[], ${e.map((c) => c.completionTokens)}::int[]
      ) AS v(id, content, thought, prompt_tokens, completion_tokens)
      WHERE m."id" = v.id AND m."status" = 'streaming' AND m."stopRequest" IS NULL AND m."sessionId" = ANY(${counted}::text[])
      RETURNING m."id"`;
    const rows = await tx.message.findMany({
      where: { id: { in: updated.map((r) => r.id) } },
      select: {
        id: true,
        sessionId: true,
        senderId: true,
        status: true,
        session: { select: { ownerId: true } },
      },
    });
    await recordWebhookEvents(
      tx,
      rows.map((r) => replyEvent(r.session.ownerId, r)),
    );
    return updated;
  });
  const rows = saved.length ? await db.message.findMany({ where: { id: { in: saved.map((r) => r.id) } }, select: messageSelect }) : [];
  return new Map(rows.map((r) => [r.id, toMessageView(r)]));
}

/** How a prompt's replies stand, read for `awaitOutcome`. */
export function promptOutcomeStore(db: Db): PromptOutcomes {
  return {
    async promptOutcome(promptId) {
      const prompt = await db.message.findUnique({ where: { id: promptId }, select: { sessionId: true } });
      if (!prompt) return null;
      const replies = await db.message.findMany({
        where: { promptId, role: 'assistant' },
        orderBy: { ordinal: 'asc' },
        select: {
          id: true,
          status: true,
          content: true,
          error: true,
          toolCalls: { select: { status: true, result: true, error: true }, orderBy: { position: 'asc' } },
        },
      });
      return { sessionId: prompt.sessionId, replies: replies.map(({ id, ...r }) => ({ messageId: id, ...r })) };
    },
  };
}
