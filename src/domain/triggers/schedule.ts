import { CronExpressionParser } from 'cron-parser';
import { z } from 'zod';
import { FIRST_INSTANT, LAST_INSTANT } from '../core/validation.ts';

/**
 * A trigger's schedule: the original's cron split into fields (seconds first, each `*` unless
 * given), read in an IANA time zone, between an optional start and end. Occurrences are computed
 * by cron-parser (the library pg-boss schedules with) in that zone and kept in UTC.
 *
 * Daylight saving, as cron-parser computes it and as we promise (docs/triggers.md): a
 * wall-clock time that does not exist on a spring-forward day (02:30 in New York) runs once, at
 * the same time after the jump (03:30 daylight time); a time that occurs twice on a fall-back day
 * (01:30) runs once, at its first instant (daylight time). A schedule whose hour is `*` follows
 * elapsed time instead: "every 30 minutes" runs through both 01:00–02:00 hours of a fall-back day.
 */

/** The schedule's fields in the order of a cron expression (the domain's names). */
export const cronFields = ['second', 'minute', 'hour', 'dayOfMonth', 'month', 'dayOfWeek'] as const;
export type CronField = (typeof cronFields)[number];

export interface Schedule {
  /** Six fields, seconds first: `0 0 9 * * 1-5`. */
  cron: string;
  timezone: string;
  startDate: Date | null;
  endDate: Date | null;
}

/** What each field may hold, for messages. */
const ranges: Record<CronField, string> = {
  second: '0-59',
  minute: '0-59',
  hour: '0-23',
  dayOfMonth: '1-31 or L',
  month: '1-12 or jan-dec',
  dayOfWeek: '0-7 or sun-sat (0 and 7 are Sunday)',
};

const DAY_SECONDS = 86_400;
/** How many days are searched for two days in a row that both run (four years: a leap day among them). */
const DAY_SEARCH = 1_500;

/** A field as callers send it: text (a step, a range `1-5`, a name `mon`) or a number. */
const fieldValue = z
  .union([z.string(), z.number().int('must be a whole number')], { error: 'must be text such as "*/5" or a number' })
  .transform((v) => String(v).trim())
  .refine((v) => v.length > 0 && v.length <= 100, 'must not be empty or longer than 100 characters');

/** The canonical name of an IANA zone (`america/new_york` → `America/New_York`), or null. */
export function canonicalZone(name: string): string | null {
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(name)) return null;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

/** Why one field is not a cron field, or null when it is (checked alone, the others `*`). */
function fieldProblem(field: CronField, value: string): string | null {
  // `H` is cron-parser's random value: a schedule must mean the same thing each time it is read.
  if (/\s/.test(value)) return `must not contain spaces (${ranges[field]})`;
  if (/h/i.test(value.toLowerCase().replace(/thu/g, ''))) return `"H" is not supported; use ${ranges[field]}`;
  const parts = cronFields.map((f) => (f === field ? value : '*'));
  try {
    CronExpressionParser.parse(parts.join(' '));
    return null;
  } catch (e) {
    return `${(e as Error).message} (${ranges[field]})`;
  }
}

/** The smallest gap, in seconds, between two times of one day the fields select. */
function smallestGapWithinADay(seconds: number[], minutes: number[], hours: number[]) {
  let smallest = Number.POSITIVE_INFINITY;
  let previous: number | null = null;
  for (const h of hours)
    for (const m of minutes)
      for (const s of seconds) {
        const at = h * 3600 + m * 60 + s;
        if (previous !== null) smallest = Math.min(smallest, at - previous);
        previous = at;
      }
  const first = hours[0]! * 3600 + minutes[0]! * 60 + seconds[0]!;
  return { smallest, first, last: previous ?? first };
}

/** Whether two days in a row both match the day fields (both run, the last time of one then the first of the next). */
function runsOnTwoDaysInARow(dayOfMonth: string, month: string, dayOfWeek: string) {
  const any = (field: string) => field === '*' || field === '?';
  if (any(dayOfMonth) && any(dayOfWeek)) return true;
  const from = Date.UTC(2000, 0, 1);
  const days = CronExpressionParser.parse(`0 0 0 ${dayOfMonth} ${month} ${dayOfWeek}`, { currentDate: new Date(from), tz: 'UTC' });
  // Days, not matches: a yearly schedule's 1,500 matches were 1,500 years (most of a second).
  const until = from + DAY_SEARCH * DAY_SECONDS * 1000;
  let previous = days.next().toDate().getTime();
  while (previous < until) {
    const next = days.next().toDate().getTime();
    if (next - previous === DAY_SECONDS * 1000) return true;
    previous = next;
  }
  return false;
}

/**
 * The shortest time between two runs of the fields, on the wall clock (a day without a
 * daylight-saving change): within a day, and from the last time of one day to the first of the next.
 */
export function shortestInterval(cron: string): number {
  const { fields } = CronExpressionParser.parse(cron);
  const { smallest, first, last } = smallestGapWithinADay(
    [...fields.second.values] as number[],
    [...fields.minute.values] as number[],
    [...fields.hour.values] as number[],
  );
  const acrossMidnight = DAY_SECONDS - last + first;
  if (acrossMidnight >= smallest) return smallest;
  const [, , , dayOfMonth, month, dayOfWeek] = cron.split(' ');
  return runsOnTwoDaysInARow(dayOfMonth!, month!, dayOfWeek!) ? acrossMidnight : smallest;
}

/** A schedule's dates are instants the service keeps (`FIRST_INSTANT` to `LAST_INSTANT`); it never runs past the last either (`nextOccurrence`). */
const DATE_RANGE = 'must be a date from 1970-01-01 to 9999-12-31 (UTC)';

const dateField = z.coerce
  .date({ error: 'must be a date and time (ISO 8601)' })
  .refine((d) => d >= FIRST_INSTANT && d <= LAST_INSTANT, DATE_RANGE);

/** The fields in words, for messages that name them beside `cron` (each transport spells the field itself its own way). */
const fieldWords: Record<CronField, string> = {
  second: 'second',
  minute: 'minute',
  hour: 'hour',
  dayOfMonth: 'day of month',
  month: 'month',
  dayOfWeek: 'day of week',
};

/** What a field selects, to compare two spellings of it (`9` and `09`, `7` and `sun`). */
function selected(field: CronField, value: string): string {
  // The nth weekday of a month (`1#2`) is kept beside the values: compared as written.
  if (value.includes('#')) return value.toLowerCase();
  const parts = cronFields.map((f) => (f === field ? value : '*'));
  const { fields } = CronExpressionParser.parse(parts.join(' '));
  return JSON.stringify([...fields[field].values].map(String).sort());
}

/**
 * The six fields a `cron` names: five (minute first, the second 0: what responses show when the
 * second is 0) or six (second first). An issue under `cron` for a wrong count.
 */
function cronParts(cron: string, ctx: z.RefinementCtx): string[] | null {
  const parts = cron.trim().split(/\s+/);
  if (parts.length === 5) return ['0', ...parts];
  if (parts.length === 6) return parts;
  ctx.addIssue({
    code: 'custom',
    message: 'must have 5 fields (minute hour day-of-month month day-of-week) or 6 (second first)',
    path: ['cron'],
  });
  return null;
}

/**
 * The six field values: from `cron` when given, each split field given beside it agreeing with
 * it (the same times, however spelt), else the split fields, `*` unless given. Each problem is an
 * issue naming its field (a split field that disagrees names `cron` too).
 */
function fieldValues(input: Partial<Record<CronField, string>> & { cron?: string }, ctx: z.RefinementCtx): string[] | null {
  if (input.cron === undefined) {
    const values = cronFields.map((f) => input[f] ?? '*');
    cronFields.forEach((f, i) => {
      const problem = fieldProblem(f, values[i]!);
      if (problem) ctx.addIssue({ code: 'custom', message: problem, path: [f] });
    });
    return values;
  }
  const parts = cronParts(input.cron, ctx);
  if (!parts) return null;
  let valid = true;
  cronFields.forEach((f, i) => {
    const problem = fieldProblem(f, parts[i]!);
    if (!problem) return;
    valid = false;
    ctx.addIssue({ code: 'custom', message: `its ${fieldWords[f]} "${parts[i]}" ${problem}`, path: ['cron'] });
  });
  if (!valid) return null;
  for (const [i, f] of cronFields.entries()) {
    const given = input[f];
    if (given === undefined) continue;
    const problem = fieldProblem(f, given);
    if (problem) ctx.addIssue({ code: 'custom', message: problem, path: [f] });
    if (problem || selected(f, given) === selected(f, parts[i]!)) continue;
    ctx.addIssue({
      code: 'custom',
      message: `disagrees with cron, whose ${fieldWords[f]} is "${parts[i]}": give one of them, or both alike`,
      path: [f],
    });
  }
  return parts;
}

/** The field a schedule's too-short interval is blamed on: `cron` when that is what was given. */
function intervalField(values: string[], interval: number, cronGiven: boolean): CronField | 'cron' {
  if (cronGiven) return 'cron';
  return values[0] === '*' || interval < 60 ? 'second' : interval < 3600 ? 'minute' : 'hour';
}

/**
 * The schedule as callers send it, checked field by field: each error names the field at fault
 * (`schedule.hour`, `schedule.timezone`, `schedule.end_date`). The fields may come split or as one
 * `cron` (as responses show it), or both when they agree. `minIntervalS` is the shortest time
 * allowed between two runs (`TRIGGER_MIN_INTERVAL_S`).
 */
export function scheduleSchema(minIntervalS: number) {
  const field = fieldValue.optional();
  return z
    .object(
      {
        second: field,
        minute: field,
        hour: field,
        dayOfMonth: field,
        month: field,
        dayOfWeek: field,
        cron: z
          .string({ error: 'must be text such as "0 9 * * 1-5"' })
          .max(200, 'must be at most 200 characters')
          .refine((v) => v.trim() !== '', 'must not be empty')
          .optional(),
        timezone: z.string().max(100, 'must be at most 100 characters').optional(),
        startDate: dateField.nullish(),
        endDate: dateField.nullish(),
      },
      {
        error: (issue) =>
          issue.input === undefined
            ? 'is required: the schedule, or null for a trigger run only by hand'
            : 'must be an object of cron fields (second, minute, hour, day_of_month, month, day_of_week, or cron), or null',
      },
    )
    .transform((input, ctx): Schedule => {
      const given = fieldValues(input, ctx);
      const values = given ?? cronFields.map(() => '*');
      const timezone = canonicalZone(input.timezone ?? 'UTC');
      if (!timezone) ctx.addIssue({ code: 'custom', message: 'must be an IANA time zone such as Europe/Paris', path: ['timezone'] });
      const startDate = input.startDate ?? null;
      const endDate = input.endDate ?? null;
      if (startDate && endDate && endDate <= startDate)
        ctx.addIssue({ code: 'custom', message: 'must be after start_date', path: ['endDate'] });
      const cron = values.join(' ');
      if (ctx.issues.length) return { cron, timezone: timezone ?? 'UTC', startDate, endDate };
      try {
        CronExpressionParser.parse(cron);
      } catch (e) {
        // Each field parsed alone: together they name a day no month has (31 February).
        ctx.addIssue({ code: 'custom', message: `never fires: ${(e as Error).message}`, path: [input.cron ? 'cron' : 'dayOfMonth'] });
        return { cron, timezone: timezone!, startDate, endDate };
      }
      const interval = shortestInterval(cron);
      if (interval < minIntervalS)
        ctx.addIssue({
          code: 'custom',
          message: `runs every ${interval} s at the closest; the shortest interval allowed is ${minIntervalS} s`,
          path: [intervalField(values, interval, input.cron !== undefined)],
        });
      return { cron, timezone: timezone!, startDate, endDate };
    });
}

/**
 * The first occurrence strictly after `after` (and not before the start date), in UTC; null when
 * there is none before the end date, or before the end of year 9999 (`LAST_INSTANT`).
 */
export function nextOccurrence(schedule: Schedule, after: Date): Date | null {
  const from = schedule.startDate && schedule.startDate.getTime() > after.getTime() ? new Date(schedule.startDate.getTime() - 1) : after;
  try {
    // Never past the last instant a schedule may name, whatever its end date.
    const endDate = schedule.endDate && schedule.endDate < LAST_INSTANT ? schedule.endDate : LAST_INSTANT;
    const occurrences = CronExpressionParser.parse(schedule.cron, { currentDate: from, tz: schedule.timezone, endDate });
    return occurrences.hasNext() ? occurrences.next().toDate() : null;
  } catch {
    // Past the end date, or a day that never comes: no next occurrence.
    return null;
  }
}

/** The fields of a stored cron (six, seconds first), by name. */
export function splitCron(cron: string): Record<CronField, string> {
  const parts = cron.split(' ');
  return Object.fromEntries(cronFields.map((f, i) => [f, parts[i] ?? '*'])) as Record<CronField, string>;
}

/** The cron as integrations read it before seconds existed: five fields when the second is 0, else all six. */
export const classicCron = (cron: string) => (cron.startsWith('0 ') ? cron.slice(2) : cron);
