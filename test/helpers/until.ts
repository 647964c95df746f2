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

/**
 * The event-driven form of `until`, for what a test's own fakes note: `until` looks at `check`
 * now and again at each `changed()`, and fails after `timeoutMs` with `what` and `state()`.
 */
export function changes(state: () => string = () => '') {
  const looks = new Set<() => void>();
  return {
    changed() {
      for (const look of [...looks]) look();
    },
    until<T>(check: () => T | undefined | null | false, what: string, timeoutMs = 30_000): Promise<T> {
      return new Promise((resolve, reject) => {
        const look = () => {
          const found = check();
          if (!found) return;
          looks.delete(look);
          clearTimeout(timer);
          resolve(found);
        };
        const timer = setTimeout(() => {
          looks.delete(look);
          const seen = state();
          reject(new Error(`timed out waiting for ${what}${seen ? `; ${seen}` : ''}`));
        }, timeoutMs);
        looks.add(look);
        look();
      });
    },
  };
}
