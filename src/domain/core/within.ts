/**
 * What `work` settles to if it does so within `ms`, else `late`. The timer is cleared either
 * way, so a wait that ended early holds nothing open (a pending timer would keep a closing
 * process alive until it fired). A rejection of `work` within the time is passed on; `work`
 * itself is not stopped: a caller that wants that aborts it on `late`.
 */
export async function within<T, L>(work: Promise<T>, ms: number, late: L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([work, new Promise<L>((resolve) => (timer = setTimeout(resolve, ms, late)))]);
  } finally {
    clearTimeout(timer);
  }
}
