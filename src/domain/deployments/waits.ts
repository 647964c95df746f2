/** After the `n`th failure in a row: 1 s, doubling, at most a minute, with a fifth either way of jitter so pollers do not retry in step. */
export const retryDelay = (n: number) => Math.min(60_000, 1_000 * 2 ** Math.max(0, n - 1)) * (0.8 + Math.random() * 0.4);

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
