import { badInput, isDomainError } from '../../domain/core/errors.ts';
import { feedFamilies } from '../../domain/core/feed-events.ts';
import { classicCron, splitCron, statusOf } from '../../domain/triggers/index.ts';
import type { Trigger as TriggerRow } from '../../generated/prisma/client.ts';
import { TriggerRunStatus, TriggerSessionTarget } from '../../domain/core/vocabulary.ts';
import { builder } from '../builder.ts';
import { toConnection } from '../connection.ts';
import { type GraphQLContext, viewerOf } from '../context.ts';
import { feedEventInterface, followFeed } from '../feed.ts';
import { Agent } from './agent.ts';
import { TriggerStatusEnum } from './enums.ts';
import { Message } from './message.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

const upper = <const T extends string>(values: readonly T[]) =>
  Object.fromEntries(values.map((v) => [v.toUpperCase(), { value: v }])) as { [K in T as Uppercase<K>]: { value: K } };

export const TriggerSessionTargetEnum = builder.enumType('TriggerSessionTarget', {
  description: 'NEW: a new session per run, titled after the trigger; EXISTING: into the trigger’s session.',
  values: upper(Object.values(TriggerSessionTarget)),
});
export const TriggerRunStatusEnum = builder.enumType('TriggerRunStatus', { values: upper(Object.values(TriggerRunStatus)) });
const ResumePauseEnum = builder.enumType('TriggerSwitch', {
  description: 'ACTIVE resumes a trigger (its next run computed from now); PAUSED stops it firing.',
  values: { ACTIVE: { value: 'active' }, PAUSED: { value: 'paused' } } as const,
});

type ScheduleView = Record<'second' | 'minute' | 'hour' | 'dayOfMonth' | 'month' | 'dayOfWeek' | 'timezone' | 'cron', string> & {
  startDate: Date | null;
  endDate: Date | null;
};

const TriggerSchedule = builder.objectRef<ScheduleView>('TriggerSchedule').implement({
  description: 'A cron split into fields (seconds first), read in an IANA time zone, between optional dates.',
  fields: (t) => ({
    second: t.exposeString('second'),
    minute: t.exposeString('minute'),
    hour: t.exposeString('hour'),
    dayOfMonth: t.exposeString('dayOfMonth'),
    month: t.exposeString('month'),
    dayOfWeek: t.exposeString('dayOfWeek'),
    timezone: t.exposeString('timezone'),
    startDate: t.expose('startDate', { type: 'DateTime', nullable: true }),
    endDate: t.expose('endDate', { type: 'DateTime', nullable: true }),
    cron: t.exposeString('cron', { description: 'The fields as one cron: five when second is 0, else six.' }),
  }),
});

const scheduleView = (t: TriggerRow): ScheduleView | null =>
  t.cron ? { ...splitCron(t.cron), timezone: t.timezone, startDate: t.startDate, endDate: t.endDate, cron: classicCron(t.cron) } : null;

export const TriggerRun = builder.prismaObject('TriggerRun', {
  description: "One run of a trigger: the prompt it sent, and the agent's reply.",
  fields: (t) => ({
    rawId: t.exposeID('id', { description: RAW_ID }),
    status: t.expose('status', { type: TriggerRunStatusEnum }),
    scheduledFor: t.expose('scheduledFor', {
      type: 'DateTime',
      nullable: true,
      description: 'The occurrence it ran for; null when run by hand.',
    }),
    startedAt: t.expose('startedAt', { type: 'DateTime' }),
    finishedAt: t.expose('finishedAt', { type: 'DateTime', nullable: true }),
    error: t.exposeString('error', { nullable: true, description: 'Why it failed.' }),
    session: t.relation('session', { nullable: true, description: 'The session its prompt went into.' }),
    message: t.field({
      type: Message,
      nullable: true,
      description: "The agent's reply.",
      resolve: async (run, _args, ctx) => {
        if (!run.messageId) return null;
        try {
          return await ctx.services.sessions.message(viewerOf(ctx), run.messageId);
        } catch (e) {
          if (isDomainError(e) && e.code === 'NOT_FOUND') return null;
          throw e;
        }
      },
    }),
  }),
});

export const Trigger = builder.prismaObject('Trigger', {
  interfaces: nodeInterfaces,
  description: 'A prompt an agent runs on a schedule (or by hand), as its owner.',
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Trigger', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    name: t.exposeString('name'),
    prompt: t.exposeString('prompt'),
    context: t.exposeString('context', { nullable: true }),
    schedule: t.field({ type: TriggerSchedule, nullable: true, description: 'Null: runs only by hand.', resolve: scheduleView }),
    sessionTarget: t.expose('sessionTarget', { type: TriggerSessionTargetEnum }),
    session: t.relation('session', { nullable: true, description: 'With sessionTarget EXISTING: where each run posts.' }),
    status: t.field({ type: TriggerStatusEnum, description: 'RUNNING while a run is under way.', resolve: statusOf }),
    lastRunTime: t.expose('lastRunTime', { type: 'DateTime', nullable: true }),
    nextScheduledRun: t.expose('nextRun', {
      type: 'DateTime',
      nullable: true,
      description: 'Null while paused, finished, or by hand only.',
    }),
    errorCount: t.exposeInt('errorCount', { description: 'Failed runs in a row; two pause the trigger.' }),
    lastError: t.exposeString('lastError', { nullable: true }),
    runs: t.connection({
      type: TriggerRun,
      description: 'Newest first (forward paging: first/after).',
      resolve: async (trigger, args, ctx) => {
        viewerOf(ctx);
        if (args.last != null || args.before != null)
          throw badInput('Runs page forwards only: use first and after', [args.last != null ? 'last' : 'before']);
        const { runs, hasNextPage, cursor } = await ctx.services.triggers.runsOf(trigger.id, { first: args.first, after: args.after });
        return toConnection(runs, cursor, { hasNextPage, hasPreviousPage: Boolean(args.after) });
      },
    }),
    agent: t.relation('agent'),
    owner: t.relation('user'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    cron: t.string({
      nullable: true,
      deprecationReason: 'Use schedule.cron.',
      resolve: (x) => (x.cron ? classicCron(x.cron) : null),
    }),
    timezone: t.exposeString('timezone', { deprecationReason: 'Use schedule.timezone.' }),
    triggerPrompt: t.exposeString('prompt', { deprecationReason: 'Use prompt.' }),
    lastRun: t.expose('lastRunTime', { type: 'DateTime', nullable: true, deprecationReason: 'Use lastRunTime.' }),
    nextRun: t.expose('nextRun', { type: 'DateTime', nullable: true, deprecationReason: 'Use nextScheduledRun.' }),
  }),
});

builder.queryField('triggers', (t) =>
  t.prismaField({
    type: ['Trigger'],
    description: 'Triggers of all the agents you own, newest first.',
    resolve: (query, _root, _args, ctx) => ctx.services.triggers.listMine(viewerOf(ctx), query),
  }),
);

builder.objectField(Agent, 'triggers', (t) =>
  t.connection({
    type: Trigger,
    nullable: true,
    description: "The agent's triggers, newest first; null unless you own the agent.",
    resolve: async (agent, args, ctx) => {
      const viewer = viewerOf(ctx);
      if (agent.ownerId !== viewer.id) return null;
      if (args.last != null || args.before != null)
        throw badInput('Triggers page forwards only: use first and after', [args.last != null ? 'last' : 'before']);
      const all = await ctx.services.triggers.listForAgent(viewer, agent.id);
      const start = args.after ? all.findIndex((x) => x.id === args.after) + 1 : 0;
      const first = Math.min(Math.max(args.first ?? 20, 1), 100);
      const page = all.slice(start, start + first);
      return toConnection(page, (x) => x.id, { hasNextPage: start + first < all.length, hasPreviousPage: start > 0 });
    },
  }),
);

const ScheduleInput = builder.inputType('TriggerScheduleInput', {
  description:
    'The cron fields split (each * unless given), or as one cron (as TriggerSchedule.cron shows it), or both when they agree; timezone is UTC unless given.',
  fields: (t) => ({
    second: t.string(),
    minute: t.string(),
    hour: t.string(),
    dayOfMonth: t.string(),
    month: t.string(),
    dayOfWeek: t.string(),
    cron: t.string({ description: '5 fields (minute first, second 0) or 6 (second first).' }),
    timezone: t.string(),
    startDate: t.field({ type: 'DateTime' }),
    endDate: t.field({ type: 'DateTime' }),
  }),
});

/** Field checks happen once, in the domain's zod schema; `schedule: null` runs only by hand. */
const CreateTriggerInput = builder.inputType('CreateTriggerInput', {
  fields: (t) => ({
    name: t.string(),
    prompt: t.string({ required: true }),
    schedule: t.field({ type: ScheduleInput, required: false, description: 'Required: null (or omitted here) runs only by hand.' }),
    sessionTarget: t.field({ type: TriggerSessionTargetEnum }),
    sessionId: t.id(),
    context: t.string(),
  }),
});
const UpdateTriggerInput = builder.inputType('UpdateTriggerInput', {
  fields: (t) => ({
    name: t.string(),
    prompt: t.string(),
    schedule: t.field({ type: ScheduleInput, description: 'null: run only by hand from now on.' }),
    sessionTarget: t.field({ type: TriggerSessionTargetEnum }),
    sessionId: t.id(),
    context: t.string(),
    status: t.field({ type: ResumePauseEnum, description: 'Pause or resume.' }),
  }),
});

/** GraphQL leaves out what was not given; an explicit null stays null (no schedule, no context). */
const given = <T extends object>(input: T) => Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined));

builder.mutationFields((t) => ({
  createTrigger: t.prismaField({
    type: 'Trigger',
    description: 'Schedules a prompt for an agent you own.',
    args: { agentId: t.arg.id({ required: true }), input: t.arg({ type: CreateTriggerInput, required: true }) },
    resolve: (query, _root, { agentId, input }, ctx) =>
      ctx.services.triggers.create(viewerOf(ctx), String(agentId), { schedule: null, ...given(input) }, query),
  }),
  updateTrigger: t.prismaField({
    type: 'Trigger',
    description: 'Changes only the fields given; status PAUSED pauses it, ACTIVE resumes it.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateTriggerInput, required: true }) },
    resolve: (query, _root, { id, input }, ctx) => ctx.services.triggers.update(viewerOf(ctx), String(id), given(input), query),
  }),
  deleteTrigger: t.boolean({
    description: 'Deletes a trigger and its runs (the sessions it made stay).',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => {
      await ctx.services.triggers.remove(viewerOf(ctx), String(id));
      return true;
    },
  }),
  runTrigger: t.prismaField({
    type: 'TriggerRun',
    description: 'Runs a trigger now, whatever its schedule; CONFLICT while a run is under way.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_query, _root, { id }, ctx) => ctx.services.triggers.runNow(viewerOf(ctx), String(id)),
  }),
}));

// ---- Following your triggers: their events on your feed (docs/feeds.md), over graphql-ws and GraphQL over SSE.

/** The trigger as it is now (null once deleted): the event names it, this reads it. */
const triggerNow = (e: { triggerId: string }, _args: unknown, ctx: GraphQLContext) =>
  ctx.services.triggers.get(viewerOf(ctx), e.triggerId).catch((error: unknown) => {
    if (isDomainError(error) && error.code === 'NOT_FOUND') return null;
    throw error;
  });

type OfTrigger = { triggerId: string; agentId: string };
const ofTrigger = <E extends OfTrigger>(t: PothosSchemaTypes.ObjectFieldBuilder<PothosSchemaTypes.ExtendDefaultTypes<any>, E>) => ({
  triggerId: t.exposeID('triggerId', { description: "The trigger's raw id." }),
  agentId: t.exposeID('agentId', { description: "Its agent's raw id." }),
  trigger: t.field({ type: Trigger, nullable: true, description: 'The trigger now; null once deleted.', resolve: triggerNow }),
});

const TriggerEvent = feedEventInterface('TriggerEvent', 'A change of one of your triggers.', {
  trigger_run_started: {
    name: 'TriggerRunStarted',
    description: 'A run began: on schedule (scheduledFor, the occurrence it is for) or by hand (scheduledFor null).',
    fields: (t) => ({
      ...ofTrigger(t),
      runId: t.exposeID('runId'),
      scheduledFor: t.field({ type: 'DateTime', nullable: true, resolve: (e) => (e.scheduledFor ? new Date(e.scheduledFor) : null) }),
    }),
  },
  trigger_run_completed: {
    name: 'TriggerRunCompleted',
    description: "A run's prompt was answered: the session it went into and the agent's reply (read them through the trigger's runs).",
    fields: (t) => ({
      ...ofTrigger(t),
      runId: t.exposeID('runId'),
      sessionId: t.exposeID('sessionId'),
      messageId: t.exposeID('messageId', { description: "The agent's reply." }),
    }),
  },
  trigger_run_failed: {
    name: 'TriggerRunFailed',
    description: 'A run failed, with its reason; errorCount counts failures in a row (two pause the trigger).',
    fields: (t) => ({
      ...ofTrigger(t),
      runId: t.exposeID('runId'),
      reason: t.exposeString('reason'),
      errorCount: t.exposeInt('errorCount'),
    }),
  },
  trigger_paused: {
    name: 'TriggerPaused',
    description: 'The trigger stopped firing until you resume it: FAILURES (two in a row), STUCK, or OWNER (you paused it).',
    fields: (t) => ({
      ...ofTrigger(t),
      reason: t.string({ resolve: (e) => e.reason.toUpperCase() }),
      message: t.exposeString('message'),
    }),
  },
  trigger_finished: {
    name: 'TriggerFinished',
    description: 'Past its end date: it will not run again.',
    fields: (t) => ofTrigger(t),
  },
  trigger_changed: {
    name: 'TriggerChanged',
    description: 'You created, changed or deleted it (change: CREATED, UPDATED, DELETED); name and status as they are after.',
    fields: (t) => ({
      triggerId: t.exposeID('triggerId'),
      agentId: t.id({ resolve: (e) => e.trigger.agentId }),
      change: t.string({ resolve: (e) => e.change.toUpperCase() }),
      name: t.string({ resolve: (e) => e.trigger.name }),
      status: t.field({ type: TriggerStatusEnum, resolve: (e) => e.trigger.status }),
      nextScheduledRun: t.field({
        type: 'DateTime',
        nullable: true,
        resolve: (e) => (e.trigger.nextScheduledRun ? new Date(e.trigger.nextScheduledRun) : null),
      }),
      trigger: t.field({ type: Trigger, nullable: true, description: 'The trigger now; null once deleted.', resolve: triggerNow }),
    }),
  },
});

builder.subscriptionFields((t) => ({
  triggerEvents: t.field({
    type: TriggerEvent,
    description:
      'Your triggers, live: runs started, completed and failed, pauses, ends and your changes. Narrowed to one agent or one trigger of yours when given (another’s: NOT_FOUND or FORBIDDEN, as for reading them); with after, first every event after that seq.',
    args: { agentId: t.arg.id(), triggerId: t.arg.id(), after: t.arg({ type: 'Seq' }) },
    ...followFeed(
      feedFamilies.trigger,
      async (
        { agentId, triggerId }: { agentId?: string | number | null; triggerId?: string | number | null; after?: number | null },
        viewer,
        ctx,
      ) => {
        const agent = agentId == null ? undefined : String(agentId);
        const trigger = triggerId == null ? undefined : String(triggerId);
        if (agent !== undefined) await ctx.services.triggers.listForAgent(viewer, agent);
        if (trigger !== undefined) await ctx.services.triggers.get(viewer, trigger);
        if (agent === undefined && trigger === undefined) return undefined;
        return (e) =>
          (trigger === undefined || e.triggerId === trigger) &&
          (agent === undefined || (e.type === 'trigger_changed' ? e.trigger.agentId : e.agentId) === agent);
      },
    ),
  }),
}));
