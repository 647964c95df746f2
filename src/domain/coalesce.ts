import DataLoader from 'dataloader';

/** Reads per statement at most, unless told otherwise: bounds a statement's size. */
const MAX_BATCH = 500;

/**
 * Reads by key that go to the database together: while one statement is under way, the keys
 * asked for meanwhile wait for it and then go in one statement. Alone, a read goes at once; under
 * load, a burst of requests costs a few statements instead of one each. Nothing is cached: every
 * read happens at or after the moment it was asked for, so a row deleted before a read began is
 * never returned to it.
 */
export function coalescedReads<K, V>(read: (keys: readonly K[]) => Promise<Map<K, V>>, maxBatch = MAX_BATCH) {
  let running: Promise<unknown> | null = null;
  return new DataLoader<K, V | null>(
    (keys) => {
      const done = read(keys).then((found) => keys.map((k) => found.get(k) ?? null));
      running = done.catch(() => {});
      return done;
    },
    {
      cache: false,
      maxBatchSize: maxBatch,
      batchScheduleFn: (run) => {
        if (running) void running.then(() => setImmediate(run));
        else setImmediate(run);
      },
    },
  );
}
