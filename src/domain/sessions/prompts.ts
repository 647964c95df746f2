import type { Prisma } from '../../generated/prisma/client.ts';
import { badInput } from '../errors.ts';
import { newId } from '../ids.ts';
import { BUDGET_EXCEEDED, reserveTurns } from './budgets.ts';
import { newMessageSelect } from './views.ts';

type Tx = Prisma.TransactionClient;

export interface SessionSettings {
  title?: string;
  scenario?: string;
  mannaBudget?: number;
  tokenBudget?: number;
  turnBudget?: number;
}

export interface PromptToSave {
  userId: string;
  /** A session to create with these agents (in order), or the id of the session posted to. */
  session: { create: SessionSettings & { agents: { id: string; name: string }[] } } | { id: string; update?: SessionSettings };
  /** Null: the request only creates or changes the session. */
  prompt: { content: string; attachments: string[]; responders: string[] } | null;
  /** The process that will write the replies (kept on them for recovery if it dies). */
  instance: string;
  /** When given, nothing is saved unless this API key still exists as the prompt is written. */
  keyId?: string | null;
}

/** The API key a prompt was sent with was deleted while it was being taken in. */
export class KeyGone extends Error {
  override name = 'KeyGone';
}

type NewMessage = Prisma.MessageGetPayload<{ select: typeof newMessageSelect }>;

/**
 * Creates a session with its agents, its owner as an `owner` user, its first note and, with a
 * prompt, the prompt and a placeholder reply per agent, in one statement: a new session is the
 * start of most conversations, and taking one in should cost one round trip and no transaction
 * held open across several (a burst of new sessions then queues for the database a statement at
 * a time). Returns the messages in order.
 */
async function insertSession(
  db: Pick<Tx, '$queryRaw'>,
  id: string,
  p: PromptToSave & { session: { create: SessionSettings & { agents: { id: string; name: string }[] } } },
  turnsSpent: number,
  promptId: string,
): Promise<(NewMessage & { sender: { username: string } | null })[]> {
  const s = p.session.create;
  const messages = [
    {
      id: newId(),
      role: 'eden',
      sender: null,
      prompt: null,
      status: 'complete',
      content: `${s.agents.map((a) => a.name).join(', ')} joined the session`,
    },
    ...(p.prompt
      ? [
          { id: promptId, role: 'user', sender: p.userId, prompt: null, status: 'complete', content: p.prompt.content },
          ...p.prompt.responders.map((agentId) => ({
            id: newId(),
            role: 'assistant',
            sender: agentId,
            prompt: promptId,
            status: 'streaming',
            content: '',
          })),
        ]
      : []),
  ];
  const rows = await db.$queryRaw<(Omit<NewMessage, 'createdAt'> & { createdAt: Date | string; senderUsername: string | null })[]>`
    WITH session AS (
      INSERT INTO "Session" ("id", "ownerId", "title", "scenario", "mannaBudget", "tokenBudget", "turnBudget", "turnsSpent", "updatedAt")
      SELECT ${id}, ${p.userId}, ${s.title ?? null}, ${s.scenario ?? null}, ${s.mannaBudget ?? null}::decimal, ${s.tokenBudget ?? null}::int, ${s.turnBudget ?? null}::int, ${turnsSpent}, now()
      WHERE ${p.keyId ?? null}::text IS NULL OR EXISTS (SELECT 1 FROM "ApiKey" WHERE "id" = ${p.keyId ?? null}::text)
      RETURNING "id"
    ), agents AS (
      INSERT INTO "SessionAgent" ("sessionId", "agentId", "position", "userId")
      SELECT session."id", agent.id, agent.position - 1, ${p.userId} FROM session, unnest(${s.agents.map((a) => a.id)}::text[]) WITH ORDINALITY AS agent(id, position)
    ), owner AS (
      INSERT INTO "SessionUser" ("sessionId", "userId", "permission") SELECT "id", ${p.userId}, 'owner' FROM session
    ), inserted AS (
      INSERT INTO "Message" ("id", "sessionId", "role", "senderId", "promptId", "status", "content", "attachments", "instance", "updatedAt")
      SELECT m.id, session."id", m.role::"MessageRole", m.sender, m.prompt, m.status::"MessageStatus", m.content,
        CASE WHEN m.id = ${promptId} THEN ${p.prompt?.attachments ?? []}::text[] ELSE ARRAY[]::text[] END,
        CASE WHEN m.role = 'assistant' THEN ${p.instance} END, now()
      FROM session, unnest(
        ${messages.map((m) => m.id)}::text[], ${messages.map((m) => m.role)}::text[], ${messages.map((m) => m.sender)}::text[],
        ${messages.map((m) => m.prompt)}::text[], ${messages.map((m) => m.status)}::text[], ${messages.map((m) => m.content)}::text[]
      ) WITH ORDINALITY AS m(id, role, sender, prompt, status, content, position)
      ORDER BY m.position
      RETURNING "id", "ordinal", "sessionId", "role"::text AS "role", "senderId", "promptId", "status"::text AS "status", "content",
        "attachments", "thought", "error", "promptTokens", "completionTokens", "createdAt"
    )
    SELECT inserted.*, u."username" AS "senderUsername" FROM inserted LEFT JOIN "User" AS u ON u."id" = inserted."senderId"
    ORDER BY inserted."ordinal"`;
  return rows.map(({ senderUsername, ...r }) => ({
    ...r,
    createdAt: new Date(r.createdAt),
    sender: senderUsername === null ? null : { username: senderUsername },
  }));
}

/** True while a session has no title and no user message yet: its next prompt is its first exchange. */
async function isUntitledAndUnprompted(tx: Tx, sessionId: string) {
  const [row] = await tx.$queryRaw<{ first: boolean }[]>`
    SELECT "title" IS NULL AND NOT EXISTS (SELECT 1 FROM "Message" WHERE "sessionId" = ${sessionId} AND "role" = 'user') AS "first"
    FROM "Session" WHERE "id" = ${sessionId}`;
  return row?.first ?? false;
}

/**
 * Saves a prompt to an existing session in the caller's transaction: the session's changes, the turns of every
 * agent that will answer (spent now, so concurrent prompts can never run more model calls than
 * the budget allows), the user message and a placeholder reply per agent, all the messages in
 * one statement. A prompt past a budget throws and saves nothing.
 */
export async function savePrompt(tx: Tx, p: PromptToSave & { session: { id: string; update?: SessionSettings } }) {
  const turns = p.prompt?.responders.length ?? 0;
  const sessionId = p.session.id;
  if (p.keyId && !(await tx.apiKey.findUnique({ where: { id: p.keyId }, select: { id: true } }))) throw new KeyGone();
  if (p.session.update) await tx.session.update({ where: { id: sessionId }, data: p.session.update, select: { id: true } });
  if (!p.prompt) return { sessionId, prompt: null, replies: [], firstExchange: false };
  const stopped = await reserveTurns(tx, sessionId, turns);
  if (stopped) throw badInput(BUDGET_EXCEEDED[stopped]);
  const firstExchange = await isUntitledAndUnprompted(tx, sessionId);
  const messages: Prisma.MessageCreateManyInput[] = [];
  const promptId = newId();
  messages.push(
    { id: promptId, sessionId, role: 'user', senderId: p.userId, content: p.prompt.content, attachments: p.prompt.attachments },
    ...p.prompt.responders.map((agentId) => ({
      sessionId,
      role: 'assistant' as const,
      senderId: agentId,
      promptId,
      status: 'streaming' as const,
      instance: p.instance,
    })),
  );
  const rows = (await tx.message.createManyAndReturn({ data: messages, select: newMessageSelect })).sort((a, b) => a.ordinal - b.ordinal);
  return saved(sessionId, rows, promptId, firstExchange);
}

type NewSessionPrompt = PromptToSave & { session: { create: SessionSettings & { agents: { id: string; name: string }[] } } };

/** The prompt and its placeholder replies, as `savePrompt` hands them back. */
function saved(sessionId: string, rows: NewMessage[], promptId: string, firstExchange: boolean) {
  const prompt = rows.find((m) => m.id === promptId)!;
  const replies = rows
    .filter((m) => m.promptId === promptId)
    .map((m) => ({ messageId: m.id, agentId: m.senderId!, ordinal: m.ordinal, createdAt: m.createdAt }));
  return { sessionId, prompt, replies, firstExchange };
}

/**
 * `savePrompt` for a new session: one statement, so it needs no transaction of its own (the
 * caller may pass the client itself).
 */
export async function saveInNewSession(db: Pick<Tx, '$queryRaw'>, p: NewSessionPrompt) {
  const turns = p.prompt?.responders.length ?? 0;
  const { create } = p.session;
  // A new session has spent nothing: only its turn budget can be too small for the agents.
  if (create.turnBudget !== undefined && turns > create.turnBudget) throw badInput(BUDGET_EXCEEDED.turns);
  const sessionId = newId();
  const promptId = newId();
  const rows = await insertSession(db, sessionId, p, turns, promptId);
  // Every new session has at least its first note: no rows means the key's check stopped the insert.
  if (rows.length === 0) throw new KeyGone();
  if (!p.prompt) return { sessionId, prompt: null, replies: [], firstExchange: false, history: [] };
  // What the replies start from: the whole conversation so far, already at hand.
  const history = rows.filter((m) => m.status !== 'streaming');
  return { ...saved(sessionId, rows, promptId, create.title === undefined), history };
}
