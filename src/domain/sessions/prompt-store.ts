import { Prisma } from '../../generated/prisma/client.ts';
import { coalescedWrites } from '../core/coalesce.ts';
import { newId } from '../core/ids.ts';
import { reserveTurns } from '../manna/stores/session-budgets.ts';
import type { newMessageSelect } from '../core/stores/message-rows.ts';
import { toMessageView } from '../core/stores/message-rows.ts';
import { askToStop, insertMessages, insertMessagesSql, type MessageInsert, repliesUnderWay } from '../replies/message-store.ts';
import { DEFAULT_WHILE_REPLYING } from './inputs.ts';
import {
  BudgetStop,
  KeyGone,
  RepliesUnderWay,
  type PromptToNewSession,
  type PromptToSession,
  type SavedNewSession,
  type SavedPrompt,
} from './store.ts';

type Tx = Prisma.TransactionClient;

type NewMessage = Prisma.MessageGetPayload<{ select: typeof newMessageSelect }>;

interface NewSessionRows {
  sessionId: string;
  promptId: string;
  prompt: PromptToNewSession;
  turnsSpent: number;
}
type InsertedRow = NewMessage & { sender: { username: string } | null };

/**
 * Creates sessions with their agents, their owners as `owner` users, their first notes and, with
 * a prompt, the prompt and a placeholder reply per agent, in one statement for all of them: a
 * new session is the start of most conversations, and taking one in should cost one round trip
 * and no transaction held open across several (a burst of new sessions would then queue for the
 * database a statement at a time). A session whose caller's key no longer exists is not written.
 * Returns each written session's messages in order.
 */
async function insertSessions(db: Pick<Tx, '$queryRaw'>, batch: readonly NewSessionRows[]): Promise<Map<string, InsertedRow[]>> {
  const sessions = batch.map(({ sessionId, prompt: p, turnsSpent }) => ({ id: sessionId, p, s: p.session.create, turnsSpent }));
  const agents = sessions.flatMap(({ id, s }) => s.agents.map((a, position) => ({ session: id, agent: a.id, position })));
  const messages = batch.flatMap(({ sessionId, promptId, prompt: p }): MessageInsert[] => [
    {
      session: sessionId,
      id: newId(),
      role: 'eden',
      sender: null,
      prompt: null,
      status: 'complete',
      content: `${p.session.create.agents.map((a) => a.name).join(', ')} joined the session`,
      attachments: '[]',
      instance: null,
    },
    ...(p.prompt
      ? [
          {
            session: sessionId,
            id: promptId,
            role: 'user' as const,
            sender: p.userId,
            prompt: null,
            status: 'complete' as const,
            content: p.prompt.content,
            attachments: JSON.stringify(p.prompt.attachments),
            instance: null,
          },
          ...p.prompt.responders.map(
            (agentId): MessageInsert => ({
              session: sessionId,
              id: newId(),
              role: 'assistant',
              sender: agentId,
              prompt: promptId,
              status: 'streaming',
              content: '',
              attachments: '[]',
              instance: p.instance,
            }),
          ),
        ]
      : []),
  ]);
  const text = (v: number | undefined) => (v === undefined ? null : String(v));
  const rows = await db.$queryRaw<(Omit<NewMessage, 'createdAt'> & { createdAt: Date | string; senderUsername: string | null })[]>`
    WITH s AS (
      SELECT * FROM unnest(
        ${sessions.map((x) => x.id)}::text[], ${sessions.map((x) => x.p.userId)}::text[], ${sessions.map((x) => x.s.title ?? null)}::text[],
        ${sessions.map((x) => x.s.scenario ?? null)}::text[], ${sessions.map((x) => text(x.s.mannaBudget))}::text[],
        ${sessions.map((x) => text(x.s.tokenBudget))}::text[], ${sessions.map((x) => text(x.s.turnBudget))}::text[],
        ${sessions.map((x) => x.turnsSpent)}::int[], ${sessions.map((x) => x.p.keyId ?? null)}::text[],
        ${sessions.map((x) => x.s.autoReply ?? null)}::boolean[], ${sessions.map((x) => x.s.replyInterval ?? null)}::int[],
        ${sessions.map((x) => x.s.actorSelection ?? null)}::text[], ${sessions.map((x) => x.s.whileReplying ?? DEFAULT_WHILE_REPLYING)}::text[]
      ) AS s(id, owner, title, scenario, manna_budget, token_budget, turn_budget, turns_spent, key_id, auto_reply, reply_interval, actor_selection,
        while_replying)
    ), session AS (
      INSERT INTO "Session" ("id", "ownerId", "title", "scenario", "mannaBudget", "tokenBudget", "turnBudget", "turnsSpent",
        "autoReply", "replyInterval", "actorSelection", "whileReplying", "updatedAt")
      SELECT s.id, s.owner, s.title, s.scenario, s.manna_budget::decimal, s.token_budget::int, s.turn_budget::int, s.turns_spent,
        s.auto_reply, s.reply_interval, s.actor_selection::"ActorSelection", s.while_replying::"WhileReplying", now()
      FROM s WHERE s.key_id IS NULL OR EXISTS (SELECT 1 FROM "ApiKey" WHERE "id" = s.key_id)
      RETURNING "id", "ownerId"
    ), agents AS (
      INSERT INTO "SessionAgent" ("sessionId", "agentId", "position", "userId")
      SELECT a.session_id, a.agent_id, a.position, session."ownerId"
      FROM unnest(${agents.map((a) => a.session)}::text[], ${agents.map((a) => a.agent)}::text[], ${agents.map((a) => a.position)}::int[])
        AS a(session_id, agent_id, position)
      JOIN session ON session."id" = a.session_id
    ), owner AS (
      INSERT INTO "SessionUser" ("sessionId", "userId", "permission") SELECT "id", "ownerId", 'owner' FROM session
    ), inserted AS (${insertMessagesSql(messages, Prisma.sql`SELECT "id" FROM session`)}
    )
    SELECT inserted.*, u."username" AS "senderUsername" FROM inserted LEFT JOIN "User" AS u ON u."id" = inserted."senderId"
    ORDER BY inserted."ordinal"`;
  const written = new Map<string, InsertedRow[]>();
  for (const { senderUsername, ...r } of rows) {
    const row = { ...r, createdAt: new Date(r.createdAt), sender: senderUsername === null ? null : { username: senderUsername } };
    const list = written.get(row.sessionId);
    if (list) list.push(row);
    else written.set(row.sessionId, [row]);
  }
  return written;
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
 * one statement. A prompt past a budget throws BudgetStop, and the transaction saves nothing.
 */
export async function savePrompt(tx: Tx, p: PromptToSession): Promise<SavedPrompt> {
  const turns = p.prompt?.responders.length ?? 0;
  const sessionId = p.session.id;
  if (p.keyId && !(await tx.apiKey.findUnique({ where: { id: p.keyId }, select: { id: true } }))) throw new KeyGone();
  if (p.session.update) await tx.session.update({ where: { id: sessionId }, data: p.session.update, select: { id: true } });
  if (!p.prompt) return { sessionId, prompt: null, replies: [], firstExchange: false };
  const stopped = await reserveTurns(tx, sessionId, turns);
  if (stopped) throw new BudgetStop(stopped);
  const underWay = await whileReplying(tx, p);
  const firstExchange = await isUntitledAndUnprompted(tx, sessionId);
  const messages: Prisma.MessageCreateManyInput[] = [];
  const promptId = p.promptId ?? newId();
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
  const rows = await insertMessages(tx, messages);
  return { ...saved(sessionId, rows, promptId, firstExchange), ...underWay };
}

/**
 * What the prompt does about the session's replies still being written, with the session's row
 * locked (its turns were just reserved), so prompts to one session take their turn here one at a
 * time: the last of a burst of `interrupt`s is the one that no later prompt stops. `reject`
 * saves nothing; the others answer after those replies end, `interrupt` and `rollback` once they
 * have been asked to stop.
 */
async function whileReplying(tx: Tx, p: PromptToSession): Promise<Pick<SavedPrompt, 'waitFor' | 'stopped'>> {
  const underWay = await repliesUnderWay(tx, p.session.id);
  if (!underWay.length) return {};
  const how =
    p.whileReplying ?? (await tx.session.findUniqueOrThrow({ where: { id: p.session.id }, select: { whileReplying: true } })).whileReplying;
  const waitFor = underWay.map((r) => r.id);
  if (how === 'reject') throw new RepliesUnderWay(waitFor);
  if (how === 'enqueue') return { waitFor };
  await askToStop(tx, waitFor, how);
  return { waitFor, stopped: { promptIds: [...new Set(underWay.flatMap((r) => (r.promptId ? [r.promptId] : [])))], how } };
}

/** The prompt and its placeholder replies, as `savePrompt` hands them back. */
function saved(sessionId: string, rows: NewMessage[], promptId: string, firstExchange: boolean): SavedPrompt {
  const prompt = toMessageView({ ...rows.find((m) => m.id === promptId)!, toolCalls: [], reactions: [] });
  const replies = rows
    .filter((m) => m.promptId === promptId)
    .map((m) => ({ messageId: m.id, agentId: m.senderId!, ordinal: m.ordinal, createdAt: m.createdAt }));
  return { sessionId, prompt, replies, firstExchange };
}

/** New sessions per statement at most: bounds a statement's size. */
const NEW_SESSIONS_PER_STATEMENT = 100;

/**
 * `savePrompt` for new sessions, which need no transaction: each is written by one statement,
 * and those that arrive while one is under way are written together by the next. When a
 * statement for several fails (an agent deleted meanwhile, say), each is written again alone, so
 * a request fails only for what is wrong with it.
 */
export function newSessionWriter(db: Pick<Tx, '$queryRaw'>) {
  const write = async (batch: readonly NewSessionRows[]) => {
    const written = await insertSessions(db, batch);
    // Every written session has at least its first note: none means the key's check stopped it.
    return new Map<NewSessionRows, InsertedRow[] | Error>(batch.map((b) => [b, written.get(b.sessionId) ?? new KeyGone()]));
  };
  const writes = coalescedWrites<NewSessionRows, InsertedRow[]>(write, NEW_SESSIONS_PER_STATEMENT);

  return async function saveInNewSession(p: PromptToNewSession): Promise<SavedNewSession> {
    const turns = p.prompt?.responders.length ?? 0;
    const sessionId = newId();
    const promptId = newId();
    const rows = await writes.load({ sessionId, promptId, prompt: p, turnsSpent: turns });
    if (!rows) throw new KeyGone();
    if (!p.prompt) return { sessionId, prompt: null, replies: [], firstExchange: false, history: [] };
    // What the replies start from: the whole conversation so far, already at hand.
    const history = rows.filter((m) => m.status !== 'streaming');
    return { ...saved(sessionId, rows, promptId, p.session.create.title === undefined), history };
  };
}
