import DataLoader from 'dataloader';
import { isDatabaseUnavailable } from './stores/prisma-errors.ts';

/** Keys per statement at most, unless told otherwise: bounds a statement's size. */
const MAX_BATCH = 500;

/**
 * Database work by key that goes in one statement for many callers: while one statement is
 * under way, the keys asked for meanwhile wait for it and then go together in the next. Alone, a
 * call goes at once; under load, a burst of requests costs a few statements instead of one each.
 * Nothing is cached: each call is served by a statement that began after it was made, so a row
 * deleted before a read began is never returned to it. `run` may answer a key with an Error,
 * which that key's caller receives.
 */
export function coalesced<K, V>(run: (keys: readonly K[]) => Promise<Map<K, V | Error>>, maxBatch = MAX_BATCH) {
  let running: Promise<unknown> | null = null;
  return new DataLoader<K, V | null>(
    (keys) => {
      const done = run(keys).then((found) => keys.map((k) => found.get(k) ?? null));
      running = done.catch(() => {});
      return done;
    },
    {
      cache: false,
      maxBatchSize: maxBatch,
      batchScheduleFn: (next) => {
        if (running) void running.then(() => setImmediate(next));
        else setImmediate(next);
      },
    },
  );
}

/**
 * `coalesced` for writes: when the statement written for a group fails, each key of the group is
 * written again alone, so one row the database refuses fails only its own caller. A database out
 * of reach refuses every row alike: then each caller gets that failure, and the database, on its
 * way back, is not sent one statement per caller.
 */
export function coalescedWrites<K, V>(write: (keys: readonly K[]) => Promise<Map<K, V | Error>>, maxBatch = MAX_BATCH) {
  return coalesced<K, V>(async (group) => {
    if (group.length === 1) return write(group);
    try {
      return await write(group);
    } catch (err) {
      if (isDatabaseUnavailable(err)) throw err;
      const alone = await Promise.all(
        group.map((k) =>
          write([k]).then(
            (m) => m.get(k),
            (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
          ),
        ),
      );
      const answers = new Map<K, V | Error>();
      group.forEach((k, i) => {
        const answer = alone[i];
        if (answer !== undefined) answers.set(k, answer);
      });
      return answers;
    }
  }, maxBatch);
}
