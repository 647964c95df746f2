import { AGENT_NOT_FOUND } from '../agents/service.ts';
import { decodeCursor, encodeCursor } from '../core/cursors.ts';
import { badInput, forbidden, notFound, unprocessable } from '../core/errors.ts';
import { canNameARow } from '../core/ids.ts';
import { nonEmptyPatch, parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import { runPageSchema, type TriggerCreateInput, type TriggerPatch, triggerCreateSchema, triggerPatchSchema } from './inputs.ts';
import type { TriggerFeedView } from '../core/feed-events.ts';
import type { TriggerEvents } from './ports.ts';
import type { TriggerRunner } from './runner.ts';
import type { Schedule } from './schedule.ts';
import type { RunPosition, Trigger, TriggerData, TriggerQuery, TriggerRead, TriggerRun, TriggerStore } from './store.ts';

export type { TriggerQuery, TriggerRead } from './store.ts';

export const TRIGGER_NOT_FOUND = 'Trigger not found';
const RUN_NOT_FOUND = 'Run not found';
/** What a stranger is told about someone else's agent: what `GET /v2/agents/{id}` says of a private one. */
export const NOT_YOUR_AGENT = 'You do not have access to this agent';

export interface TriggerLimits {
  /** `TRIGGER_MIN_INTERVAL_S`: the shortest time between two scheduled runs. */
  minIntervalS: number;
  /** `TRIGGERS_PER_USER`. */
  perUser: number;
}

/** The status the API shows: `running` while a run is under way, else the stored one. */
export const statusOf = (t: Pick<Trigger, 'status' | 'runningRunId'>) => (t.runningRunId ? 'running' : t.status);

/** A trigger as its owner's feed shows it. */
export const feedView = (t: Trigger): TriggerFeedView => ({
  id: t.id,
  agentId: t.agentId,
  name: t.name,
  status: statusOf(t),
  lastRunTime: t.lastRunTime?.toISOString() ?? null,
  nextScheduledRun: t.nextRun?.toISOString() ?? null,
  errorCount: t.errorCount,
  lastError: t.lastError,
});

const scheduleColumns = (s: Schedule | null) =>
  s
    ? { cron: s.cron, timezone: s.timezone, startDate: s.startDate, endDate: s.endDate }
    : { cron: null, timezone: 'UTC', startDate: null, endDate: null };

const runCursor = (run: RunPosition) => encodeCursor('run', `${run.startedAt.toISOString()}|${run.id}`);
const runPosition = (cursor: string) =>
  decodeCursor('run', cursor, (v) => {
    const [at, id] = v.split('|');
    const date = new Date(at ?? '');
    return id && !Number.isNaN(date.getTime()) ? { startedAt: date, id } : null;
  });

/**
 * Triggers, as REST and GraphQL use them: only an agent's owner makes, reads, changes, runs or
 * deletes its triggers; a stranger is answered as for an agent they cannot see, and nothing
 * changes. Schedules are checked once here (`schedule.ts`); firing is the runner's.
 */
export function triggerService(store: TriggerStore, runner: TriggerRunner, events: TriggerEvents, limits: TriggerLimits) {
  return {
    /** One trigger, for the owner of its agent only (`agentId`: the agent the path names). */
    get<Q extends TriggerQuery = object>(viewer: Viewer, id: string, query?: Q, agentId?: string): Promise<TriggerRead<Q>> {
      return ownTrigger(store, viewer, id, agentId, query);
    },

    /** Triggers of every agent the caller owns, newest first. */
    listMine<Q extends TriggerQuery = object>(viewer: Viewer, query?: Q): Promise<TriggerRead<Q>[]> {
      return store.listOwned(viewer.id, query);
    },

    /** The triggers of one of the caller's agents, newest first. */
    async listForAgent<Q extends TriggerQuery = object>(viewer: Viewer, agentId: string, query?: Q): Promise<TriggerRead<Q>[]> {
      await ownAgent(store, viewer, agentId);
      return store.listOwned(viewer.id, query, agentId);
    },

    ...triggerChanges({ store, runner, events, limits }),

    /** Runs it now, whatever its schedule; a conflict while a run is under way. The run. */
    async runNow(viewer: Viewer, id: string, agentId?: string): Promise<TriggerRun> {
      const trigger = await ownTrigger(store, viewer, id, agentId);
      const runId = await runner.runNow(trigger);
      return (await store.run(runId))!;
    },

    /** One run of a trigger the caller owns. */
    async run(viewer: Viewer, triggerId: string, runId: string): Promise<TriggerRun> {
      const trigger = await ownTrigger(store, viewer, triggerId);
      const run = canNameARow(runId) ? await store.run(runId) : null;
      if (run?.triggerId !== trigger.id) throw notFound(RUN_NOT_FOUND);
      return run;
    },

    /** A trigger's runs, newest first, a page at a time. */
    async runs(viewer: Viewer, triggerId: string, page: { first?: unknown; after?: unknown }) {
      const trigger = await ownTrigger(store, viewer, triggerId);
      return runsPage(store, trigger.id, page);
    },

    /** The runs of a trigger already read for its owner (a field of it). */
    runsOf: (triggerId: string, page: { first?: unknown; after?: unknown }) => runsPage(store, triggerId, page),
  };
}

interface TriggerServiceParts {
  store: TriggerStore;
  runner: TriggerRunner;
  events: TriggerEvents;
  limits: TriggerLimits;
}

/** Making, changing and deleting triggers, each told on the owner's feed. */
function triggerChanges({ store, runner, events, limits }: TriggerServiceParts) {
  const createSchema = triggerCreateSchema(limits.minIntervalS);
  const patchSchema = triggerPatchSchema(limits.minIntervalS);
  const changed = (t: Trigger, change: 'created' | 'updated' | 'deleted') =>
    events.publish(t.userId, { type: 'trigger_changed', triggerId: t.id, change, trigger: feedView(t) });

  return {
    async create<Q extends TriggerQuery = object>(viewer: Viewer, agentId: string, raw: unknown, query?: Q): Promise<TriggerRead<Q>> {
      const agent = await ownAgent(store, viewer, agentId);
      const input: TriggerCreateInput = parseInput(createSchema, raw);
      await checkSession(store, viewer.id, agent.id, input.sessionId);
      const nextRun = firstRun(runner, input.schedule);
      const data: TriggerData = {
        name: input.name,
        prompt: input.prompt,
        context: input.context,
        ...scheduleColumns(input.schedule),
        sessionTarget: input.sessionTarget,
        sessionId: input.sessionId,
        status: 'active',
        nextRun,
      };
      const created = await store.createWithin(viewer.id, agent.id, limits.perUser, data, query);
      if (!created) throw unprocessable(`Trigger limit reached: a user may have at most ${limits.perUser} triggers`);
      await runner.queueNext(created);
      await changed(created, 'created');
      return created;
    },

    /** Only the fields sent change; `status` pauses (`paused`) or resumes (`active`) it. */
    async update<Q extends TriggerQuery = object>(
      viewer: Viewer,
      id: string,
      raw: unknown,
      query?: Q,
      agentId?: string,
    ): Promise<TriggerRead<Q>> {
      const current = await ownTrigger(store, viewer, id, agentId);
      const patch: TriggerPatch = nonEmptyPatch(parseInput(patchSchema, raw), 'trigger');
      const data = await changes(store, runner, current, patch);
      const updated = await store.update(current.id, data, query);
      if (!updated) throw notFound(TRIGGER_NOT_FOUND);
      await runner.queueNext(updated);
      await changed(updated, 'updated');
      if (patch.status === 'paused' && current.status !== 'paused')
        await events.publish(updated.userId, {
          type: 'trigger_paused',
          triggerId: updated.id,
          agentId: updated.agentId,
          reason: 'owner',
          message: 'Paused by its owner',
        });
      return updated;
    },

    async remove(viewer: Viewer, id: string, agentId?: string): Promise<void> {
      const trigger = await ownTrigger(store, viewer, id, agentId);
      if (!(await store.remove(trigger.id))) throw notFound(TRIGGER_NOT_FOUND);
      await changed(trigger, 'deleted');
    },
  };
}

/** The agent, when the viewer owns it; otherwise what they would be told of an agent they cannot see. */
async function ownAgent(store: TriggerStore, viewer: Viewer, agentId: string) {
  const agent = canNameARow(agentId) ? await store.agent(agentId) : null;
  if (!agent) throw notFound(AGENT_NOT_FOUND);
  if (agent.ownerId !== viewer.id) throw forbidden(NOT_YOUR_AGENT);
  return agent;
}

/** One of the viewer's triggers (under `agentId`, when the path names one). */
async function ownTrigger<Q extends TriggerQuery = object>(store: TriggerStore, viewer: Viewer, id: string, agentId?: string, query?: Q) {
  if (agentId !== undefined) await ownAgent(store, viewer, agentId);
  const row = canNameARow(id) ? await store.findOwned(viewer.id, id, query, agentId) : null;
  if (!row) throw notFound(TRIGGER_NOT_FOUND);
  return row;
}

/** A session to post into must be the owner's own, with the trigger's agent in it. */
async function checkSession(store: TriggerStore, userId: string, agentId: string, sessionId: string | null) {
  if (!sessionId) return;
  const fit = canNameARow(sessionId) ? await store.sessionFit(sessionId, userId, agentId) : 'missing';
  if (fit === 'missing' || fit === 'not-owner') throw badInput('must be one of your sessions', ['sessionId']);
  if (fit === 'agent-absent') throw badInput("must be a session the trigger's agent is in", ['sessionId']);
}

/** The first run of a schedule from now; a schedule with none is refused, naming it. */
function firstRun(runner: TriggerRunner, schedule: Schedule | null) {
  if (!schedule) return null;
  const next = runner.nextAfter(scheduleColumns(schedule), runner.now());
  if (!next) throw neverFires(schedule, 'never fires');
  return next;
}

/** A schedule with no run from now, refused naming what bounds it: the end date, the start date (the year 9999 ends first), or the days. */
function neverFires(schedule: Schedule, words: string) {
  if (schedule.endDate) return badInput(`${words}: no occurrence before end_date`, ['schedule', 'endDate']);
  if (schedule.startDate) return badInput(`${words}: no occurrence from start_date to the end of year 9999`, ['schedule', 'startDate']);
  return badInput(words, ['schedule', 'dayOfMonth']);
}

/** What a patch changes, with the next run it implies (queued before it is saved). */
async function changes(store: TriggerStore, runner: TriggerRunner, current: Trigger, patch: TriggerPatch): Promise<Partial<TriggerData>> {
  const session = sessionChange(current, patch);
  if (patch.sessionId !== undefined || patch.sessionTarget !== undefined)
    await checkSession(store, current.userId, current.agentId, session.sessionId);
  const data: Partial<TriggerData> = {
    name: patch.name,
    prompt: patch.prompt,
    context: patch.context,
    ...session,
    ...(patch.schedule !== undefined ? scheduleColumns(patch.schedule) : {}),
  };
  return { ...data, ...runChange(current, patch, (schedule) => runner.nextAfter(scheduleColumns(schedule), runner.now())) };
}

/** Where a patched trigger posts: sending a session means posting into it; a new session each time needs none. */
function sessionChange(current: Trigger, patch: TriggerPatch): Pick<TriggerData, 'sessionTarget' | 'sessionId'> {
  const sessionTarget = patch.sessionTarget ?? (patch.sessionId ? 'existing' : current.sessionTarget);
  const sessionId = sessionTarget === 'new' ? null : patch.sessionId !== undefined ? patch.sessionId : current.sessionId;
  if (sessionTarget === 'existing' && !sessionId) throw badInput('is required when session_target is existing', ['sessionId']);
  return { sessionTarget, sessionId };
}

/**
 * The status and next run a patch implies (none when they stay): a pause drops the next run; a
 * finished trigger given a new schedule is active again.
 */
function runChange(current: Trigger, patch: TriggerPatch, fromNow: (schedule: Schedule) => Date | null): Partial<TriggerData> {
  const status = patch.status ?? (current.status === 'finished' && patch.schedule !== undefined ? 'active' : current.status);
  if (status === 'paused') return { status, nextRun: null };
  if (status === 'finished') return {};
  // Active (resumed, rescheduled, or left so): the next run from now; a resume forgets past failures.
  const rescheduled = patch.schedule !== undefined || current.status !== 'active';
  if (!rescheduled) return {};
  const schedule = patch.schedule !== undefined ? patch.schedule : scheduleOf(current);
  const nextRun = schedule ? fromNow(schedule) : null;
  if (schedule && !nextRun && patch.schedule) throw neverFires(patch.schedule, 'never fires from now on');
  return {
    status: schedule && !nextRun ? 'finished' : 'active',
    nextRun,
    ...(current.status !== 'active' ? { errorCount: 0 } : {}),
  };
}

const scheduleOf = (t: Trigger): Schedule | null =>
  t.cron ? { cron: t.cron, timezone: t.timezone, startDate: t.startDate, endDate: t.endDate } : null;

async function runsPage(store: TriggerStore, triggerId: string, page: { first?: unknown; after?: unknown }) {
  const { first, after } = parseInput(runPageSchema, Object.fromEntries(Object.entries(page).filter(([, v]) => v != null)));
  const rows = await store.runs(triggerId, after ? runPosition(after) : null, first + 1);
  return { runs: rows.slice(0, first), hasNextPage: rows.length > first, cursor: runCursor };
}

export type TriggerService = ReturnType<typeof triggerService>;
