/**
 * Resolves with `check`'s first truthy answer, asked every `everyMs`; fails after `timeoutMs` with
 * `what` and the last answer. For what happens in the background (a job, a turn), not a sleep.
 */
export async function until<T>(
  what: string,
  check: () => T | Promise<T>,
  { timeoutMs = 30_000, everyMs = 50 } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await check();
    if (last) return last as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
