/**
 * The time an event is stamped with (ISO 8601, to the millisecond). A reply's tokens are published
 * many a millisecond across streams, so the text is made once a millisecond rather than once an
 * event: the same string either way.
 */
let madeAt = Number.NaN;
let made = '';

export function eventTime(now: number = Date.now()): string {
  if (now !== madeAt) {
    made = new Date(now).toISOString();
    madeAt = now;
  }
  return made;
}
