import { z } from 'zod';
import { statusOf, classicCron, splitCron } from '../domain/triggers/index.ts';
import type { Trigger, TriggerRun } from '../generated/prisma/client.ts';
import { TriggerRunStatus, TriggerSessionTarget, TriggerStatus } from '../domain/core/vocabulary.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { fieldNames } from './field-names.ts';

/** A trigger's REST names: the original's snake_case, and `session` for the session it posts into. */
export const triggerNames = fieldNames({
  sessionTarget: 'session_target',
  sessionId: 'session',
  dayOfMonth: 'day_of_month',
  dayOfWeek: 'day_of_week',
  startDate: 'start_date',
  endDate: 'end_date',
});

/** Triggers answer as agents do (`{error}`, 401 for an agent that is not yours), naming fields in REST's spelling. */
export const triggerErrors: RestErrorStyle = { bodyKey: 'error', status: { FORBIDDEN: 401 }, fieldName: triggerNames.toRest };

/** How many of its latest runs a trigger shows in `runs`. */
export const RUNS_SHOWN = 10;
/** What `services.triggers` is asked to load for a REST answer. */
export const restTriggerQuery = {
  include: { runs: { orderBy: [{ startedAt: 'desc' as const }, { id: 'desc' as const }], take: RUNS_SHOWN } },
};
export type RestTriggerRow = Trigger & { runs: TriggerRun[] };

const cronField = z.string().meta({ description: 'A cron field: `*`, numbers, ranges `1-5`, lists `1,15`, steps `*/10`, names `mon`' });

/** The schedule as callers send it: split fields (each `*` unless given), or `cron`, or both when they agree. */
export const restScheduleInput = z
  .object({
    second: cronField.optional(),
    minute: cronField.optional(),
    hour: cronField.optional(),
    day_of_month: cronField.optional(),
    month: cronField.optional(),
    day_of_week: cronField.optional(),
    cron: z.string().optional().meta({
      description:
        'The fields as one cron, as responses show it: 5 fields (minute first, second 0) or 6 (second first). With split fields beside it, they must agree',
    }),
    timezone: z.string().optional().meta({ description: 'IANA name (Europe/Paris); UTC unless given' }),
    start_date: z.string().nullable().optional().meta({ description: 'ISO 8601: no run before it' }),
    end_date: z.string().nullable().optional().meta({ description: 'ISO 8601: no run after it; the trigger is then finished' }),
  })
  .nullable()
  .meta({ description: 'null: the trigger runs only by hand' });

const promptFields = {
  prompt: z.string().optional().meta({ description: 'What the agent is asked on each run (required, under one of its three names)' }),
  trigger_prompt: z.string().optional().meta({ description: 'An older name of prompt' }),
  instruction: z.string().optional().meta({ description: 'The oldest name of prompt' }),
};

/** `POST /v2/agents/{agentId}/triggers`, as callers spell it (the domain's schema checks it). */
export const restTriggerCreateBody = z.object({
  name: z.string().optional().meta({ description: 'Untitled Task unless given' }),
  ...promptFields,
  schedule: restScheduleInput,
  session_target: z.enum(TriggerSessionTarget).optional().meta({ description: 'new: a session per run; existing: into `session`' }),
  session: z.string().nullable().optional().meta({ description: 'With session_target existing: one of your sessions the agent is in' }),
  context: z.string().nullable().optional().meta({ description: 'Sent after the prompt on each run' }),
});

/** `PATCH`: only the fields sent change; `status` pauses or resumes. */
export const restTriggerPatchBody = restTriggerCreateBody.partial().extend({
  status: z.enum(['active', 'paused']).optional().meta({ description: 'paused: stop firing; active: resume from now' }),
});

/** The original's older names of the prompt, accepted in request bodies. */
export function triggerBodyToDomain(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const { trigger_prompt, instruction, ...rest } = body as Record<string, unknown>;
  const prompt = rest.prompt ?? trigger_prompt ?? instruction;
  return triggerNames.toDomain(prompt === undefined ? rest : { ...rest, prompt }, ['schedule']);
}

export const restTriggerRunSchema = z
  .object({
    id: z.string(),
    message_id: z.string().nullable().meta({ description: "The agent's reply this run produced" }),
    session_id: z.string().nullable().meta({ description: 'The session its prompt went into' }),
    ran_at: z.date(),
    scheduled_for: z.date().nullable().meta({ description: 'The occurrence it ran for; null when run by hand' }),
    status: z.enum(TriggerRunStatus),
    error: z.string().nullable(),
    finished_at: z.date().nullable(),
  })
  .meta({ id: 'TriggerRun' });

export const restTriggerSchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    name: z.string(),
    agent: z.string(),
    user: z.string(),
    prompt: z.string(),
    trigger_prompt: z.string().meta({ description: 'The same as prompt, under the name earlier bodies used' }),
    context: z.string().nullable(),
    schedule: z
      .object({
        second: z.string(),
        minute: z.string(),
        hour: z.string(),
        day_of_month: z.string(),
        month: z.string(),
        day_of_week: z.string(),
        timezone: z.string(),
        start_date: z.date().nullable(),
        end_date: z.date().nullable(),
        cron: z.string().meta({ description: 'The fields as one cron: five when second is 0 (as earlier bodies showed it), else six' }),
      })
      .nullable()
      .meta({ description: 'null: runs only by hand' }),
    session_target: z.enum(TriggerSessionTarget),
    session: z.string().nullable(),
    status: z.enum(TriggerStatus),
    last_run_time: z.date().nullable(),
    next_scheduled_run: z.date().nullable().meta({ description: 'UTC; null while paused, finished, or by hand only' }),
    last_run: z.date().nullable().meta({ description: 'The same as last_run_time, under the name earlier bodies used' }),
    next_run: z.date().nullable().meta({ description: 'The same as next_scheduled_run, under the name earlier bodies used' }),
    error_count: z.number().int().meta({ description: 'Failed runs in a row; two pause the trigger' }),
    last_error: z.string().nullable(),
    runs: z.array(restTriggerRunSchema).meta({ description: `The latest ${RUNS_SHOWN} runs, newest first` }),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'Trigger' });

export const toRestTriggerRun = (r: TriggerRun): z.input<typeof restTriggerRunSchema> => ({
  id: r.id,
  message_id: r.messageId,
  session_id: r.sessionId,
  ran_at: r.startedAt,
  scheduled_for: r.scheduledFor,
  status: r.status,
  error: r.error,
  finished_at: r.finishedAt,
});

export function toRestTrigger(t: RestTriggerRow): z.input<typeof restTriggerSchema> {
  const fields = t.cron ? splitCron(t.cron) : null;
  return {
    _id: t.id,
    id: t.id,
    name: t.name,
    agent: t.agentId,
    user: t.userId,
    prompt: t.prompt,
    trigger_prompt: t.prompt,
    context: t.context,
    schedule:
      fields && t.cron
        ? {
            second: fields.second,
            minute: fields.minute,
            hour: fields.hour,
            day_of_month: fields.dayOfMonth,
            month: fields.month,
            day_of_week: fields.dayOfWeek,
            timezone: t.timezone,
            start_date: t.startDate,
            end_date: t.endDate,
            cron: classicCron(t.cron),
          }
        : null,
    session_target: t.sessionTarget,
    session: t.sessionId,
    status: statusOf(t),
    last_run_time: t.lastRunTime,
    next_scheduled_run: t.nextRun,
    last_run: t.lastRunTime,
    next_run: t.nextRun,
    error_count: t.errorCount,
    last_error: t.lastError,
    runs: t.runs.map(toRestTriggerRun),
    createdAt: t.createdAt,
    updatedAt: t.updatedAt,
  };
}
