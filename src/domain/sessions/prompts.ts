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
}

/**
 * Creates a session with its agents, its owner as an `owner` user and its first note, in one
 * statement (a new session is the start of most conversations: it should cost little).
 */
async function insertSession(tx: Tx, id: string, userId: string, s: SessionSettings & { agents: { id: string }[] }, turnsSpent: number) {
  await tx.$executeRaw`
    WITH session AS (
      INSERT INTO "Session" ("id", "ownerId", "title", "scenario", "mannaBudget", "tokenBudget", "turnBudget", "turnsSpent", "updatedAt")
      VALUES (${id}, ${userId}, ${s.title ?? null}, ${s.scenario ?? null}, ${s.mannaBudget ?? null}::decimal, ${s.tokenBudget ?? null}::int, ${s.turnBudget ?? null}::int, ${turnsSpent}, now())
      RETURNING "id"
    ), agents AS (
      INSERT INTO "SessionAgent" ("sessionId", "agentId", "position", "userId")
      SELECT session."id", agent.id, agent.position - 1, ${userId} FROM session, unnest(${s.agents.map((a) => a.id)}::text[]) WITH ORDINALITY AS agent(id, position)
    )
    INSERT INTO "SessionUser" ("sessionId", "userId", "permission") SELECT "id", ${userId}, 'owner' FROM session`;
}

/** True while a session has no title and no user message yet: its next prompt is its first exchange. */
async function isUntitledAndUnprompted(tx: Tx, sessionId: string) {
  const [row] = await tx.$queryRaw<{ first: boolean }[]>`
    SELECT "title" IS NULL AND NOT EXISTS (SELECT 1 FROM "Message" WHERE "sessionId" = ${sessionId} AND "role" = 'user') AS "first"
    FROM "Session" WHERE "id" = ${sessionId}`;
  return row?.first ?? false;
}

/**
 * Saves a prompt in the caller's transaction: the session (new, or changed), the turns of every
 * agent that will answer (spent now, so concurrent prompts can never run more model calls than
 * the budget allows), the user message and a placeholder reply per agent, all the messages in
 * one statement. A prompt past a budget throws and saves nothing.
 */
export async function savePrompt(tx: Tx, p: PromptToSave) {
  const turns = p.prompt?.responders.length ?? 0;
  let sessionId: string;
  let firstExchange: boolean;
  const messages: Prisma.MessageCreateManyInput[] = [];
  if ('create' in p.session) {
    const { create } = p.session;
    // A new session has spent nothing: only its turn budget can be too small for the agents.
    if (create.turnBudget !== undefined && turns > create.turnBudget) throw badInput(BUDGET_EXCEEDED.turns);
    sessionId = newId();
    await insertSession(tx, sessionId, p.userId, create, turns);
    messages.push({ sessionId, role: 'eden', content: `${create.agents.map((a) => a.name).join(', ')} joined the session` });
    firstExchange = create.title === undefined;
  } else {
    sessionId = p.session.id;
    if (p.session.update) await tx.session.update({ where: { id: sessionId }, data: p.session.update, select: { id: true } });
    if (!p.prompt) return { sessionId, prompt: null, replies: [], firstExchange: false };
    const stopped = await reserveTurns(tx, sessionId, turns);
    if (stopped) throw badInput(BUDGET_EXCEEDED[stopped]);
    firstExchange = await isUntitledAndUnprompted(tx, sessionId);
  }
  if (!p.prompt) {
    await tx.message.createMany({ data: messages });
    return { sessionId, prompt: null, replies: [], firstExchange: false };
  }
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
  const prompt = rows.find((m) => m.id === promptId)!;
  const replies = rows
    .filter((m) => m.promptId === promptId)
    .map((m) => ({ messageId: m.id, agentId: m.senderId!, ordinal: m.ordinal, createdAt: m.createdAt }));
  return { sessionId, prompt, replies, firstExchange };
}
