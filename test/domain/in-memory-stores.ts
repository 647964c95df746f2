import { Decimal } from '@prisma/client/runtime/client';
import { mannaFromText } from '../../src/domain/core/manna.ts';
import type { MessageView, ToolCallView } from '../../src/domain/core/events.ts';
import type { Budget } from '../../src/domain/core/budgets.ts';
import type { Outcome, ReplyAgent, ReplyStore } from '../../src/domain/replies/ports.ts';
import type { PausedReply } from '../../src/domain/replies/runtime.ts';
import type { RecordedCall, ToolStore } from '../../src/domain/tools/ports.ts';

// The reply engine's and the tool host's stores kept in memory, holding the rules their SQL
// holds (the budgets' conditional update, a hold taken from subscription manna first, a call
// settled once), so the rules above them can be tested without a database.

export interface SessionRow {
  id: string;
  ownerId: string;
  title: string | null;
  scenario: string | null;
  agents: ReplyAgent[];
  turnBudget: number | null;
  tokenBudget: number | null;
  mannaBudget: Decimal | null;
  turnsSpent: number;
  tokensSpent: number;
  mannaSpent: Decimal;
}

export interface CallRow extends RecordedCall {
  messageId: string;
  args: string;
  status: ToolCallView['status'];
  result: unknown;
  cost: Decimal | null;
  error: string | null;
  approval?: ToolCallView['approval'];
}

export interface LedgerRow {
  userId: string;
  kind: 'subscription' | 'forever';
  amount: Decimal;
  reason: string;
  toolCallId: string;
}

/** The database the two stores share. */
export function memoryDatabase() {
  return {
    sessions: new Map<string, SessionRow>(),
    messages: new Map<string, MessageView>(),
    calls: new Map<string, CallRow>(),
    balances: new Map<string, { subscription: Decimal; forever: Decimal }>(),
    ledger: [] as LedgerRow[],
    agentTools: new Map<
      string,
      { tools: Record<string, boolean>; ownerId: string; ownerPays: 'off' | 'full'; toolApproval?: Record<string, unknown> }
    >(),
    /** Replies paused for approval: what each needs to go on, by message. */
    paused: new Map<string, PausedReply>(),
    /** Set to make every statement fail as a database out of reach does. */
    away: false,
  };
}
export type MemoryDatabase = ReturnType<typeof memoryDatabase>;

/** What node-postgres throws when the server is gone: `isDatabaseUnavailable` knows it by its code. */
const unreachable = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

export function memoryReplyStore(db: MemoryDatabase): ReplyStore {
  const reachable = () => {
    if (db.away) throw unreachable();
  };
  const session = (id: string) => db.sessions.get(id)!;
  const message = (id: string) => {
    const m = db.messages.get(id);
    if (!m) throw new Error(`no message ${id}`);
    return m;
  };
  const withCalls = (m: MessageView): MessageView => ({
    ...m,
    toolCalls: [...db.calls.values()].filter((c) => c.messageId === m.id).map(callView),
  });
  const abandonCalls = (messageId: string, error: string) => {
    for (const c of db.calls.values()) {
      if (c.messageId !== messageId) continue;
      if (c.status === 'running') {
        Object.assign(c, { status: 'cancelled', error });
        refund(db, c, session(message(messageId).sessionId));
      } else if (c.status === 'pending' || c.status === 'awaiting_approval') Object.assign(c, { status: 'cancelled', error });
    }
  };

  return {
    async conversation(sessionId, historyLimit) {
      reachable();
      const s = db.sessions.get(sessionId);
      if (!s) return null;
      const history = [...db.messages.values()]
        .filter((m) => m.sessionId === sessionId && m.status !== 'streaming')
        .sort((a, b) => a.ordinal - b.ordinal)
        .slice(-historyLimit)
        .map((m) => ({ message: withCalls(m), senderName: m.senderId === s.ownerId ? 'alice' : null }));
      return { scenario: s.scenario, agents: s.agents, history };
    },

    async reserveTurn(sessionId, pendingTokens): Promise<Budget | null> {
      reachable();
      const s = session(sessionId);
      const tokens = s.tokenBudget !== null && s.tokensSpent + pendingTokens >= s.tokenBudget;
      const manna = s.mannaBudget !== null && s.mannaSpent.gte(s.mannaBudget);
      if ((s.turnBudget === null || s.turnsSpent + 1 <= s.turnBudget) && !tokens && !manna) {
        s.turnsSpent++;
        return null;
      }
      return tokens ? 'tokens' : manna ? 'manna' : 'turns';
    },

    async saveText(messageId, content) {
      reachable();
      return withCalls(Object.assign(message(messageId), { content }));
    },

    async closeReply(sessionId, messageId, outcome: Outcome, toolError) {
      reachable();
      session(sessionId).tokensSpent += outcome.promptTokens + outcome.completionTokens;
      abandonCalls(messageId, toolError);
      const { content, status, error, promptTokens, completionTokens } = outcome;
      return withCalls(
        Object.assign(message(messageId), { content, thought: outcome.thought || null, status, error, promptTokens, completionTokens }),
      );
    },

    async removeReply(sessionId, messageId, tokens, toolError) {
      reachable();
      if (message(messageId).status !== 'streaming') return false;
      session(sessionId).tokensSpent += tokens;
      abandonCalls(messageId, toolError);
      return db.messages.delete(messageId);
    },

    async stillWriting(messageIds) {
      reachable();
      return messageIds.filter((id) => db.messages.get(id)?.status === 'streaming');
    },

    async stopRequested() {
      reachable();
      return null;
    },

    async pause(messageId, content, state) {
      reachable();
      const m = db.messages.get(messageId);
      if (!m || m.status !== 'streaming') return null;
      m.content = content;
      db.paused.set(messageId, structuredClone(state));
      return withCalls(m);
    },

    async claimPaused(messageId) {
      reachable();
      const state = db.paused.get(messageId);
      const waiting = [...db.calls.values()].some((c) => c.messageId === messageId && c.status === 'awaiting_approval');
      if (!state || waiting || db.messages.get(messageId)?.status !== 'streaming') return null;
      db.paused.delete(messageId);
      return state;
    },

    async claimPausedIn(sessionId, promptId) {
      reachable();
      const taken = [...db.paused.entries()].filter(
        ([, p]) => p.job.sessionId === sessionId && (promptId === undefined || p.job.promptId === promptId),
      );
      for (const [id] of taken) db.paused.delete(id);
      return taken.map(([, p]) => p);
    },

    async saveCheckpoints(group) {
      reachable();
      for (const c of group) {
        const m = db.messages.get(c.messageId);
        if (m?.status === 'streaming') Object.assign(m, { content: c.content, thought: c.thought || null });
      }
    },

    async saveCompletions(group) {
      reachable();
      const saved = new Map<string, MessageView>();
      for (const c of group) {
        const m = db.messages.get(c.messageId);
        if (m?.status !== 'streaming') continue;
        session(c.sessionId).tokensSpent += c.promptTokens + c.completionTokens;
        const { content, promptTokens, completionTokens } = c;
        Object.assign(m, { content, thought: c.thought || null, status: 'complete', error: null, promptTokens, completionTokens });
        saved.set(m.id, withCalls(m));
      }
      return saved;
    },

    async nameSessions(group) {
      reachable();
      const named = new Set<string>();
      for (const t of group) {
        const s = db.sessions.get(t.sessionId);
        if (s && s.title === null) {
          s.title = t.title;
          named.add(s.id);
        }
      }
      return named;
    },
  };
}

const callView = (c: CallRow): ToolCallView => ({
  id: c.id,
  tool: c.tool,
  args: c.args,
  status: c.status,
  result: c.result,
  cost: c.cost === null ? null : c.cost.toNumber(),
  error: c.error,
  approval: c.approval ?? null,
});

/** Gives a call's hold back to the balances it came from, and to its session's manna budget. */
function refund(db: MemoryDatabase, call: CallRow, session: SessionRow) {
  for (const held of db.ledger.filter((l) => l.toolCallId === call.id && l.amount.isNegative())) {
    const balance = db.balances.get(held.userId)!;
    balance[held.kind] = balance[held.kind].plus(held.amount.negated());
    db.ledger.push({ ...held, amount: held.amount.negated(), reason: `refund: ${call.tool} ${call.status}` });
    session.mannaSpent = session.mannaSpent.plus(held.amount);
  }
}

export function memoryToolStore(db: MemoryDatabase): ToolStore {
  let ids = 0;
  return {
    async payers(agentId, sessionId) {
      const agent = db.agentTools.get(agentId)!;
      return {
        tools: agent.tools,
        ownerPays: agent.ownerPays,
        agentOwnerId: agent.ownerId,
        sessionOwnerId: db.sessions.get(sessionId)!.ownerId,
        toolApproval: agent.toolApproval ?? {},
      };
    },

    async awaitApproval(call, price) {
      const row = db.calls.get(call.id)!;
      if (row.status !== 'pending') return null;
      Object.assign(row, { status: 'awaiting_approval', approval: 'requested', cost: new Decimal(price) });
      return callView(row);
    },

    async approvalOutcomes(ids) {
      return ids.flatMap((id) => {
        const row = db.calls.get(id);
        return row ? [{ id, status: row.status, error: row.error }] : [];
      });
    },

    async record({ messageId }, calls) {
      const start = [...db.calls.values()].filter((c) => c.messageId === messageId).length;
      return calls.map((c, i) => {
        const row: CallRow = {
          id: `call-${++ids}`,
          position: start + i,
          tool: c.name,
          messageId,
          args: c.arguments,
          status: 'pending',
          result: null,
          cost: null,
          error: null,
        };
        db.calls.set(row.id, row);
        return { id: row.id, position: row.position, tool: row.tool };
      });
    },

    async hold(call, price, payer, place) {
      const session = db.sessions.get(place.sessionId)!;
      const row = db.calls.get(call.id)!;
      const cost = new Decimal(price);
      if (cost.isPositive() && !cost.isZero()) {
        if (session.mannaBudget !== null && session.mannaSpent.plus(cost).gt(session.mannaBudget)) return { refused: 'budget' };
        const balance = db.balances.get(payer)!;
        if (balance.subscription.plus(balance.forever).lt(cost))
          return { refused: 'balance', balance: mannaFromText(balance.subscription.plus(balance.forever).toString()) };
        if (row.status !== 'pending') return { refused: 'gone' };
        const fromSubscription = Decimal.min(balance.subscription, cost);
        const parts = { subscription: fromSubscription, forever: cost.minus(fromSubscription) };
        for (const kind of ['subscription', 'forever'] as const) {
          if (parts[kind].isZero()) continue;
          balance[kind] = balance[kind].minus(parts[kind]);
          db.ledger.push({ userId: payer, kind, amount: parts[kind].negated(), reason: `tool: ${call.tool}`, toolCallId: call.id });
        }
        session.mannaSpent = session.mannaSpent.plus(cost);
      } else if (row.status !== 'pending') return { refused: 'gone' };
      Object.assign(row, { status: 'running', cost });
      return null;
    },

    async settle(call, place, outcome, held, creations) {
      const row = db.calls.get(call.id)!;
      if (row.status !== (held ? 'running' : 'pending')) return null;
      Object.assign(row, { status: outcome.status, result: outcome.result ?? null, error: outcome.error ?? null });
      if (held && outcome.status !== 'completed') refund(db, row, db.sessions.get(place.sessionId)!);
      if (creations.length) throw new Error('these tests make no media');
      return callView(row);
    },
  };
}
