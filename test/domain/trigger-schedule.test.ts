import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/core/errors.ts';
import { parseInput } from '../../src/domain/core/validation.ts';
import { classicCron, nextOccurrence, scheduleSchema, shortestInterval, splitCron } from '../../src/domain/triggers/schedule.ts';

const parse = (raw: unknown, minIntervalS = 60) => parseInput(scheduleSchema(minIntervalS), raw);
/** The error a schedule is refused with: the field it names and the message. */
const refusal = (raw: unknown, minIntervalS = 60) => {
  try {
    parse(raw, minIntervalS);
  } catch (e) {
    if (e instanceof DomainError) return { field: e.fieldPath?.join('.'), message: e.message };
    throw e;
  }
  throw new Error(`accepted: ${JSON.stringify(raw)}`);
};
/** The next `n` occurrences from `from`, as ISO strings. */
const occurrences = (raw: unknown, from: string, n: number) => {
  const schedule = parse(raw);
  const out: string[] = [];
  let at = new Date(from);
  for (let i = 0; i < n; i++) {
    const next = nextOccurrence(schedule, at);
    if (!next) break;
    out.push(next.toISOString());
    at = next;
  }
  return out;
};

describe('a schedule in New York time', () => {
  const nineAm = { second: '0', minute: '0', hour: '9', timezone: 'America/New_York' };

  it('runs 09:00 at 14:00 UTC in January (standard time) and 13:00 UTC in July (daylight time)', () => {
    expect(occurrences(nineAm, '2027-01-10T00:00:00Z', 2)).toEqual(['2027-01-10T14:00:00.000Z', '2027-01-11T14:00:00.000Z']);
    expect(occurrences(nineAm, '2027-07-10T00:00:00Z', 2)).toEqual(['2027-07-10T13:00:00.000Z', '2027-07-11T13:00:00.000Z']);
  });

  it('runs a time that does not exist on the spring-forward day once, an hour later on the clock (02:30 → 03:30 EDT)', () => {
    // 14 March 2027: clocks go from 02:00 EST to 03:00 EDT.
    const runs = occurrences({ second: '0', minute: '30', hour: '2', timezone: 'America/New_York' }, '2027-03-13T00:00:00Z', 3);
    expect(runs).toEqual(['2027-03-13T07:30:00.000Z', '2027-03-14T07:30:00.000Z', '2027-03-15T06:30:00.000Z']);
  });

  it('runs a time that occurs twice on the fall-back day once, at its first instant (01:30 EDT)', () => {
    // 7 November 2027: 01:00–02:00 happens in EDT (05:00–06:00 UTC), then again in EST (06:00–07:00 UTC).
    const runs = occurrences({ second: '0', minute: '30', hour: '1', timezone: 'America/New_York' }, '2027-11-06T00:00:00Z', 3);
    expect(runs).toEqual(['2027-11-06T05:30:00.000Z', '2027-11-07T05:30:00.000Z', '2027-11-08T06:30:00.000Z']);
    // Looked for from inside the repeated hour, the second 01:30 is not a run either.
    expect(occurrences({ second: '0', minute: '30', hour: '1', timezone: 'America/New_York' }, '2027-11-07T05:45:00Z', 1)).toEqual([
      '2027-11-08T06:30:00.000Z',
    ]);
  });

  it('follows elapsed time when the hour is *: every 30 minutes runs through both 01:00 hours of the fall-back day', () => {
    const runs = occurrences({ second: '0', minute: '*/30', timezone: 'America/New_York' }, '2027-11-07T04:45:00Z', 5);
    expect(runs).toEqual([
      '2027-11-07T05:00:00.000Z',
      '2027-11-07T05:30:00.000Z',
      '2027-11-07T06:00:00.000Z',
      '2027-11-07T06:30:00.000Z',
      '2027-11-07T07:00:00.000Z',
    ]);
  });
});

describe('schedule fields', () => {
  it('default to * and UTC, with seconds first', () => {
    expect(parse({ second: 0, minute: '0', hour: 9 })).toEqual({ cron: '0 0 9 * * *', timezone: 'UTC', startDate: null, endDate: null });
    // An hour alone means every second of it: refused as too often, naming the second.
    expect(refusal({ minute: '0', hour: 9 }).field).toBe('second');
    expect(splitCron('0 0 9 * * 1-5')).toEqual({ second: '0', minute: '0', hour: '9', dayOfMonth: '*', month: '*', dayOfWeek: '1-5' });
    expect(classicCron('0 0 9 * * 1-5')).toBe('0 9 * * 1-5');
    expect(classicCron('30 0 9 * * 1-5')).toBe('30 0 9 * * 1-5');
  });

  it('take the zone by its IANA name in any letter case, and keep its canonical name', () => {
    expect(parse({ second: '0', minute: '0', timezone: 'america/new_york' }).timezone).toBe('America/New_York');
  });

  it.each([
    [{ second: '61', minute: '0' }, 'second'],
    [{ second: '0', minute: '60' }, 'minute'],
    [{ second: '0', minute: '0', hour: '24' }, 'hour'],
    [{ second: '0', minute: '0', hour: '9', dayOfMonth: '32' }, 'dayOfMonth'],
    [{ second: '0', minute: '0', hour: '9', month: '13' }, 'month'],
    [{ second: '0', minute: '0', hour: '9', dayOfWeek: '8' }, 'dayOfWeek'],
    [{ second: '0', minute: '0', hour: '5-2' }, 'hour'],
    [{ second: '0', minute: '*/0' }, 'minute'],
    [{ second: '0', minute: 'soon' }, 'minute'],
    [{ second: '0', minute: 'H' }, 'minute'],
    [{ second: '0', minute: '0 1' }, 'minute'],
    [{ second: '0', minute: '0', timezone: 'Mars/Olympus_Mons' }, 'timezone'],
    [{ second: '0', minute: '0', timezone: '+05:00' }, 'timezone'],
    [{ second: '0', minute: '0', startDate: '2027-02-01T00:00:00Z', endDate: '2027-01-01T00:00:00Z' }, 'endDate'],
    [{ second: '0', minute: '0', startDate: 'next tuesday' }, 'startDate'],
  ])('refuse %j, naming %s', (raw, field) => {
    expect(refusal(raw).field).toBe(field);
  });

  it('refuse a day no month has as a schedule that never fires', () => {
    const { field, message } = refusal({ second: '0', minute: '0', hour: '0', dayOfMonth: '30', month: '2' });
    expect(field).toBe('dayOfMonth');
    expect(message).toMatch(/never fires/);
  });

  it('refuse a schedule that runs more often than the shortest interval, naming where', () => {
    expect(refusal({ minute: '*' })).toMatchObject({ field: 'second', message: expect.stringMatching(/every 1 s .* 60 s/) });
    expect(refusal({ second: '*/30' }).field).toBe('second');
    // Twice a day, a second apart: the shortest gap counts, not the average.
    expect(refusal({ second: '0,1', minute: '0', hour: '9' }).field).toBe('second');
    // 23:59:59 and 00:00:00 on the next day are a second apart.
    expect(refusal({ second: '0,59', minute: '0,59', hour: '0,23' }).field).toBe('second');
    expect(parse({ second: '*/5' }, 1).cron).toBe('*/5 * * * * *');
    expect(parse({ second: '0' }).cron).toBe('0 * * * * *');
  });

  it('measure the shortest interval across midnight only on days that follow each other', () => {
    expect(shortestInterval('0 0 * * * *')).toBe(3600);
    expect(shortestInterval('59 59 23 * * *')).toBe(86_400);
    expect(shortestInterval('0,59 0,59 0,23 * * *')).toBe(1);
    // Mondays only: 23:59:59 Monday and 00:00:00 Tuesday never both run.
    expect(shortestInterval('0,59 0,59 0,23 * * 1')).toBe(59);
    expect(shortestInterval('*/7 * * * * *')).toBe(4);
  });
});

describe('the next occurrence', () => {
  it('is never before the start date, and none after the end date', () => {
    const windowed = parse({ second: '0', minute: '0', hour: '12', startDate: '2027-05-03T12:00:00Z', endDate: '2027-05-04T12:00:00Z' });
    expect(nextOccurrence(windowed, new Date('2027-01-01T00:00:00Z'))?.toISOString()).toBe('2027-05-03T12:00:00.000Z');
    expect(nextOccurrence(windowed, new Date('2027-05-03T12:00:00Z'))?.toISOString()).toBe('2027-05-04T12:00:00.000Z');
    expect(nextOccurrence(windowed, new Date('2027-05-04T12:00:00Z'))).toBeNull();
  });

  it('is strictly after the time given, so a run at an occurrence plans the one after it', () => {
    const everyMinute = parse({ second: '0' });
    expect(nextOccurrence(everyMinute, new Date('2027-05-03T12:00:00.000Z'))?.toISOString()).toBe('2027-05-03T12:01:00.000Z');
    expect(nextOccurrence(everyMinute, new Date('2027-05-03T11:59:59.999Z'))?.toISOString()).toBe('2027-05-03T12:00:00.000Z');
  });
});

describe('a schedule given as one cron', () => {
  it('takes 5 fields (the second 0) or 6 (second first), and reads the same as the fields split', () => {
    expect(parse({ cron: '0 9 * * 1-5' })).toEqual(parse({ second: '0', minute: '0', hour: '9', dayOfWeek: '1-5' }));
    expect(parse({ cron: '  15 30 9 * * mon  ' }).cron).toBe('15 30 9 * * mon');
    // What a response shows (classicCron), taken back, is the schedule it came from.
    for (const cron of ['0 0 9 * * 1-5', '30 0 9 1 * *', '0 */5 * * * *'])
      expect(parse({ cron: classicCron(cron), ...splitCron(cron) }).cron).toBe(cron);
  });

  it('takes split fields beside it that select the same times, however spelt', () => {
    expect(parse({ cron: '0 9 * * 7', hour: '09', dayOfWeek: 'sun', second: 0 }).cron).toBe('0 0 9 * * 7');
    expect(parse({ cron: '0 9 * * 0', dayOfWeek: '7' }).cron).toBe('0 0 9 * * 0');
  });

  it.each([
    [{ cron: '0 9 * * *', hour: '10' }, 'hour', /disagrees with cron, whose hour is "9"/],
    [{ cron: '0 9 * * *', second: '30' }, 'second', /disagrees with cron, whose second is "0"/],
    [{ cron: '0 9 * * 1#2', dayOfWeek: '1' }, 'dayOfWeek', /disagrees with cron/],
    [{ cron: '0 9 * * *', hour: '25' }, 'hour', /\(0-23\)/],
    [{ cron: '0 9 * *' }, 'cron', /5 fields .* or 6/],
    [{ cron: '0 9 H * *' }, 'cron', /its day of month "H" "H" is not supported/],
    [{ cron: '* * * * * *' }, 'cron', /runs every 1 s/],
  ])('refuses %j, naming %s', (raw, field, message) => {
    expect(refusal(raw)).toMatchObject({ field, message: expect.stringMatching(message) });
  });
});

describe('dates a schedule may name', () => {
  it('are from 1970 to the end of 9999: a date past it is refused, naming it', () => {
    expect(refusal({ second: '0', startDate: '+275760-09-13T00:00:00Z' })).toMatchObject({ field: 'startDate', message: /9999-12-31/ });
    expect(refusal({ second: '0', endDate: '+010000-01-01T00:00:00Z' }).field).toBe('endDate');
    expect(refusal({ second: '0', startDate: '-000001-01-01T00:00:00Z' }).field).toBe('startDate');
    expect(parse({ second: '0', endDate: '9999-12-31T23:59:59.999Z' }).endDate?.toISOString()).toBe('9999-12-31T23:59:59.999Z');
  });

  it('bound every occurrence: none falls after 9999, whatever the end date', () => {
    const yearly = parse({ second: '0', minute: '0', hour: '0', dayOfMonth: '1', month: '1' });
    expect(nextOccurrence(yearly, new Date('9998-06-01T00:00:00Z'))?.toISOString()).toBe('9999-01-01T00:00:00.000Z');
    expect(nextOccurrence(yearly, new Date('9999-06-01T00:00:00Z'))).toBeNull();
    const fromLate = parse({ second: '0', minute: '0', hour: '0', dayOfMonth: '1', month: '1', startDate: '9999-06-01T00:00:00Z' });
    expect(nextOccurrence(fromLate, new Date('2027-01-01T00:00:00Z'))).toBeNull();
  });
});
