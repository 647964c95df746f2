import { randomUUID } from 'node:crypto';
import type {
  ReplyOutcome,
  RunPosition,
  SessionFit,
  Trigger,
  TriggerClaim,
  TriggerData,
  TriggerRun,
  TriggerStore,
} from '../../src/domain/triggers/store.ts';

// The triggers' store kept in memory, holding the rules its SQL holds (a claim only of an idle
// trigger due for exactly that occurrence, one run per occurrence, a run settled once, the
// per-user cap), so the rules above it can be tested without a database.

export interface MemorySession {
  ownerId: string;
  agentIds: string[];
}

export function memoryTriggerDatabase() {
  return {
    agents: new Map<string, { id: string; ownerId: string; public: boolean }>(),
    sessions: new Map<string, MemorySession>(),
    triggers: new Map<string, Trigger>(),
    runs: new Map<string, TriggerRun>(),
    /** Replies by message id: how each ended, as the reply engine saved it. */
    replies: new Map<string, ReplyOutcome & { promptId: string }>(),
  };
}
export type MemoryTriggerDatabase = ReturnType<typeof memoryTriggerDatabase>;

const copy = <T extends object>(row: T): T => ({ ...row });

export function memoryTriggerStore(db: MemoryTriggerDatabase, now: () => Date): TriggerStore {
  const owned = (ownerId: string, agentId?: string) =>
    [...db.triggers.values()]
      .filter((t) => db.agents.get(t.agentId)?.ownerId === ownerId && (!agentId || t.agentId === agentId))
      .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || b.id.localeCompare(a.id));
  const write = (id: string, data: Partial<Trigger>) => {
    const t = db.triggers.get(id);
    if (!t) return null;
    const next = { ...t, ...Object.fromEntries(Object.entries(data).filter(([, v]) => v !== undefined)), updatedAt: now() };
    db.triggers.set(id, next);
    return copy(next);
  };

  return {
    agent: async (id) => db.agents.get(id) ?? null,
    async sessionFit(sessionId, userId, agentId): Promise<SessionFit> {
      const s = db.sessions.get(sessionId);
      if (!s) return 'missing';
      if (s.ownerId !== userId) return 'not-owner';
      return s.agentIds.includes(agentId) ? 'fits' : 'agent-absent';
    },
    findOwned: async (ownerId, id, _query, agentId) => (owned(ownerId, agentId).find((t) => t.id === id) as never) ?? null,
    listOwned: async (ownerId, _query, agentId) => owned(ownerId, agentId) as never,
    findMany: async (ids) => ids.flatMap((id) => (db.triggers.has(id) ? [copy(db.triggers.get(id)!)] : [])),
    async runs(triggerId, from: RunPosition | null, take) {
      return [...db.runs.values()]
        .filter((r) => r.triggerId === triggerId)
        .sort((a, b) => b.startedAt.getTime() - a.startedAt.getTime() || b.id.localeCompare(a.id))
        .filter((r) => !from || r.startedAt < from.startedAt || (r.startedAt.getTime() === from.startedAt.getTime() && r.id < from.id))
        .slice(0, take)
        .map(copy);
    },
    run: async (id) => (db.runs.has(id) ? copy(db.runs.get(id)!) : null),
    async createWithin(userId, agentId, cap, data: TriggerData) {
      if ([...db.triggers.values()].filter((t) => t.userId === userId).length >= cap) return null;
      const at = now();
      const row: Trigger = {
        id: data.id ?? randomUUID(),
        userId,
        agentId,
        name: data.name,
        prompt: data.prompt,
        context: data.context,
        cron: data.cron,
        timezone: data.timezone,
        startDate: data.startDate,
        endDate: data.endDate,
        sessionTarget: data.sessionTarget,
        sessionId: data.sessionId,
        status: data.status,
        nextRun: data.nextRun,
        queuedFor: null,
        lastRunTime: null,
        errorCount: data.errorCount ?? 0,
        lastError: null,
        runningRunId: null,
        runningSince: null,
        createdAt: at,
        updatedAt: at,
      };
      db.triggers.set(row.id, row);
      return copy(row) as never;
    },
    update: async (id, data) => write(id, data) as never,
    async remove(id) {
      for (const [runId, run] of db.runs) if (run.triggerId === id) db.runs.delete(runId);
      return db.triggers.delete(id);
    },
    async claim(claims) {
      const claimOne = ({ triggerId, claim }: TriggerClaim) => {
        const t = db.triggers.get(triggerId);
        if (!t || t.runningRunId) return null;
        if (claim.scheduledFor && (t.status !== 'active' || t.nextRun?.getTime() !== claim.scheduledFor.getTime())) return null;
        if (
          claim.scheduledFor &&
          [...db.runs.values()].some((r) => r.triggerId === triggerId && r.scheduledFor?.getTime() === claim.scheduledFor!.getTime())
        )
          return null;
        db.runs.set(claim.runId, {
          id: claim.runId,
          triggerId,
          scheduledFor: claim.scheduledFor,
          status: 'running',
          error: null,
          sessionId: null,
          messageId: null,
          startedAt: claim.at,
          finishedAt: null,
        });
        return write(triggerId, {
          runningRunId: claim.runId,
          runningSince: claim.at,
          lastRunTime: claim.at,
          ...(claim.scheduledFor ? { nextRun: claim.next, status: claim.status } : {}),
        });
      };
      // One at a time, as the statement's rows are: a second claim of a trigger in the group finds it held.
      return claims.flatMap((c) => claimOne(c) ?? []);
    },
    async renewLease(triggerId, runId, since, at) {
      const t = db.triggers.get(triggerId);
      if (!t || t.runningRunId !== runId || t.runningSince?.getTime() !== since?.getTime()) return false;
      write(triggerId, { runningSince: at });
      return true;
    },
    promptOf: async (messageId) => db.replies.get(messageId)?.promptId ?? null,
    // Prompts live in the sessions' store, which this one does not hold: the rules tests send through a fake.
    unlinkedPrompt: async () => null,
    async linkRuns(links) {
      for (const { runId, sessionId, messageId } of links) {
        const run = db.runs.get(runId);
        if (run) db.runs.set(runId, { ...run, sessionId, messageId });
      }
    },
    async settle(runId, outcome, pauseAfter) {
      const run = db.runs.get(runId);
      if (!run || run.status !== 'running') return null;
      const error = outcome.status === 'failed' ? outcome.error : null;
      const ended = { ...run, status: outcome.status, error, finishedAt: now() };
      db.runs.set(runId, ended);
      const t = db.triggers.get(run.triggerId);
      if (!t || t.runningRunId !== runId) return { run: copy(ended), trigger: t ? copy(t) : null, paused: false };
      const errorCount = error === null ? 0 : t.errorCount + 1;
      const paused = error !== null && errorCount >= pauseAfter && t.status === 'active';
      db.triggers.set(t.id, {
        ...t,
        runningRunId: null,
        runningSince: null,
        errorCount,
        lastError: error ?? t.lastError,
        ...(paused ? { status: 'paused' as const, nextRun: null } : {}),
      });
      return { run: copy(ended), trigger: copy(db.triggers.get(t.id)!), paused };
    },
    async markQueued(id, at) {
      const t = db.triggers.get(id);
      if (t?.nextRun?.getTime() === at.getTime()) write(id, { queuedFor: at });
    },
    unplanned: async (take) =>
      [...db.triggers.values()]
        .filter((t) => t.status === 'active' && !t.nextRun && t.cron && !t.runningRunId)
        .slice(0, take)
        .map(copy),
    unqueued: async (until, take) =>
      [...db.triggers.values()]
        .filter((t) => t.nextRun && t.nextRun.getTime() !== t.queuedFor?.getTime() && t.nextRun <= until)
        .sort((a, b) => a.nextRun!.getTime() - b.nextRun!.getTime())
        .slice(0, take)
        .map(copy),
    underWay: async (after, stuckBefore, take) =>
      [...db.triggers.values()]
        .filter((t) => {
          const run = t.runningRunId ? db.runs.get(t.runningRunId) : undefined;
          if (!run || t.id <= (after ?? '')) return false;
          return run.startedAt < stuckBefore || !run.messageId || db.replies.get(run.messageId)?.status !== 'streaming';
        })
        .sort((a, b) => (a.id < b.id ? -1 : 1))
        .slice(0, take)
        .map(copy),
  };
}
