import { Prisma } from '../../generated/prisma/client.ts';
import type { ReplyStop } from '../../generated/prisma/enums.ts';
import { newMessageSelect } from '../core/stores/message-rows.ts';

/**
 * The statements that add messages, which the replies' stores own. A prompt is saved with its
 * session's changes and the turns it spends, so these run in the caller's transaction or as part
 * of its one statement; the replies own every other write of a message (its text, its end).
 */

type Tx = Prisma.TransactionClient;

/** Adds messages in the caller's transaction (a prompt and its placeholder replies, an agent's own turn); in order. */
export async function insertMessages(tx: Pick<Tx, 'message'>, messages: Prisma.MessageCreateManyInput[]) {
  return (await tx.message.createManyAndReturn({ data: messages, select: newMessageSelect })).sort((a, b) => a.ordinal - b.ordinal);
}

/** A session's replies still being written, oldest first (with the session's row locked by the caller). */
export function repliesUnderWay(tx: Pick<Tx, 'message'>, sessionId: string) {
  return tx.message.findMany({
    where: { sessionId, role: 'assistant', status: 'streaming' },
    orderBy: { ordinal: 'asc' },
    select: { id: true, promptId: true },
  });
}

/**
 * Records that a newer prompt asks these replies to stop, in its transaction: whoever writes
 * them reads it before saving one as complete, so a request that reaches no running reply (it
 * had not started yet, or its instance missed the signal) still holds. The first request stands.
 */
export async function askToStop(tx: Pick<Tx, 'message'>, messageIds: string[], how: ReplyStop) {
  await tx.message.updateMany({ where: { id: { in: messageIds }, status: 'streaming', stopRequest: null }, data: { stopRequest: how } });
}

/** A message as a new session's statement adds it; `attachments` as a JSON array's text. */
export interface MessageInsert {
  session: string;
  id: string;
  role: 'eden' | 'user' | 'assistant';
  sender: string | null;
  prompt: string | null;
  status: 'complete' | 'streaming';
  content: string;
  attachments: string;
  instance: string | null;
}

/**
 * The INSERT of messages as a part of the caller's one statement (a new session's first note,
 * prompt and replies, written with the session in one round trip): `written` selects the ids of
 * the sessions the statement did write, and only their messages are added, in the order given.
 * Returns `newMessageSelect`'s columns (role and status as text).
 */
export function insertMessagesSql(messages: readonly MessageInsert[], written: Prisma.Sql): Prisma.Sql {
  const col = <K extends keyof MessageInsert>(key: K) => messages.map((m) => m[key]);
  return Prisma.sql`
    INSERT INTO "Message" ("id", "sessionId", "role", "senderId", "promptId", "status", "content", "attachments", "instance", "updatedAt")
    SELECT m.id, m.session_id, m.role::"MessageRole", m.sender, m.prompt, m.status::"MessageStatus", m.content,
      ARRAY(SELECT jsonb_array_elements_text(m.attachments::jsonb)), m.instance, now()
    FROM unnest(
      ${col('session')}::text[], ${col('id')}::text[], ${col('role')}::text[], ${col('sender')}::text[], ${col('prompt')}::text[],
      ${col('status')}::text[], ${col('content')}::text[], ${col('attachments')}::text[], ${col('instance')}::text[]
    ) WITH ORDINALITY AS m(session_id, id, role, sender, prompt, status, content, attachments, instance, position)
    WHERE m.session_id IN (${written})
    ORDER BY m.position
    RETURNING "id", "ordinal", "sessionId", "role"::text AS "role", "senderId", "promptId", "status"::text AS "status", "content",
      "attachments", "thought", "error", "promptTokens", "completionTokens", "createdAt"`;
}
