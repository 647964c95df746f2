/**
 * Turns for tool calls: at most `perUser` running at once for one user and `total` in the
 * process. A call waits in order for both; one whose reply is stopped meanwhile leaves the queue.
 */
export function toolRunQueue(limits: { perUser: number; total: number }) {
  let running = 0;
  const byUser = new Map<string, number>();
  const waiting: { user: string; start(): void }[] = [];

  const canStart = (user: string) => running < limits.total && (byUser.get(user) ?? 0) < limits.perUser;
  const take = (user: string) => {
    running++;
    byUser.set(user, (byUser.get(user) ?? 0) + 1);
  };
  const give = (user: string) => {
    running--;
    const left = byUser.get(user)! - 1;
    if (left) byUser.set(user, left);
    else byUser.delete(user);
    // The first waiting call that may start now does: one user's full share never blocks another's.
    for (let i = 0; i < waiting.length && running < limits.total; ) {
      const w = waiting[i]!;
      if (canStart(w.user)) {
        waiting.splice(i, 1);
        take(w.user);
        w.start();
      } else i++;
    }
  };

  return {
    /** Waits for a turn; the returned function gives it back. Rejects with the signal's reason if stopped first. */
    async turn(user: string, signal: AbortSignal): Promise<() => void> {
      signal.throwIfAborted();
      if (canStart(user)) take(user);
      else
        await new Promise<void>((resolve, reject) => {
          const entry = {
            user,
            start: () => {
              signal.removeEventListener('abort', leave);
              resolve();
            },
          };
          const leave = () => {
            waiting.splice(waiting.indexOf(entry), 1);
            reject(signal.reason);
          };
          signal.addEventListener('abort', leave, { once: true });
          waiting.push(entry);
        });
      let given = false;
      return () => {
        if (!given) give(user);
        given = true;
      };
    },
    /** Calls running now (for tests and metrics). */
    running: () => running,
  };
}

export type ToolRunQueue = ReturnType<typeof toolRunQueue>;
