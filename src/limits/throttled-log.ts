export interface WarnLog {
  warn(obj: unknown, msg?: string): void;
}

/**
 * A store that fails (Redis down) fails for every request: one warning per interval says so
 * without flooding the log.
 */
export function throttledWarnings(log: WarnLog, intervalMs = 10_000): WarnLog {
  let lastAt = -Infinity;
  return {
    warn(obj, msg) {
      if (Date.now() - lastAt < intervalMs) return;
      lastAt = Date.now();
      log.warn(obj, msg);
    },
  };
}
