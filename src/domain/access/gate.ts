import { coalesced } from '../core/coalesce.ts';
import type { Viewer } from '../core/viewer.ts';
import type { WatchAccessStore } from './store.ts';
import { type AccessTicket, KEY_DELETED_END, type WatchEnd, type WatchGate } from '../core/watch.ts';

interface Ticket {
  viewer: Viewer;
  /** Null for a watch of the viewer's own feed: only its key is checked. */
  sessionId: string | null;
  freshUntil: number;
  waiters: (() => void)[];
  lost(end: WatchEnd): void;
}

/**
 * Keeps open watches honest about access whatever happened to the signals that announce its
 * loss (a `user_removed` published before the watch began, a revocation Redis never carried): a
 * watch delivers only while its viewer's membership and API key were confirmed within `everyMs`
 * (a watch of the viewer's own feed: its key). Every open watch is checked together, in a few statements whatever their number, so a stream
 * under load costs nothing per event; one found without access ends with the reason.
 */
export function accessGate(
  store: WatchAccessStore,
  everyMs: number,
  log: { warn(obj: unknown, msg?: string): void },
): WatchGate & { stop(): void } {
  const open = new Set<Ticket>();
  let checking: Promise<void> | null = null;
  /** Which API keys still exist: the periodic check and newly opened watches ask together. */
  const liveKeys = coalesced(
    async (ids: readonly string[]) => new Map([...(await store.existingKeys(ids))].map((id) => [id, true as const])),
  );

  const wake = (t: Ticket) => {
    for (const w of t.waiters.splice(0)) w();
  };

  async function checkAll() {
    const started = Date.now();
    const tickets = [...open];
    try {
      const keyIds = [...new Set(tickets.flatMap((t) => (t.viewer.keyId ? [t.viewer.keyId] : [])))];
      const alive = new Set<string>();
      for (const [i, live] of (await liveKeys.loadMany(keyIds)).entries()) {
        if (live instanceof Error) throw live;
        if (live) alive.add(keyIds[i]!);
      }
      const inSessions = tickets.filter((t) => t.sessionId !== null);
      const sessionIds = [...new Set(inSessions.map((t) => t.sessionId!))];
      const userIds = [...new Set(inSessions.map((t) => t.viewer.id))];
      const members = await store.members(sessionIds, userIds);
      for (const t of tickets) {
        if (!open.has(t)) continue;
        // A watch of the viewer's own feed has no session to be removed from (null).
        const people = t.sessionId === null ? null : members.get(t.sessionId);
        if (t.viewer.keyId && !alive.has(t.viewer.keyId)) t.lost(KEY_DELETED_END);
        else if (people === undefined) t.lost({ end: true, code: 'SESSION_DELETED', reason: 'This session was deleted', lastSeq: null });
        else if (people !== null && !people.has(t.viewer.id))
          t.lost({ end: true, code: 'ACCESS_REVOKED', reason: 'You were removed from this session', lastSeq: null });
        else {
          t.freshUntil = started + everyMs;
          wake(t);
        }
      }
    } catch (err) {
      // Taking access away is a write, which fails as well while the database is out of reach:
      // watches go on as last confirmed rather than falling silent, and are checked next time.
      log.warn({ err }, 'access of open watches could not be checked now; checking again shortly');
      for (const t of tickets) {
        t.freshUntil = started + everyMs;
        wake(t);
      }
    }
  }

  const check = () => {
    checking ??= checkAll().finally(() => {
      checking = null;
    });
    return checking;
  };

  // Checked at twice the rate freshness lasts, so a watch in steady use never has to wait.
  const timer = setInterval(
    () => {
      if (open.size) void check();
    },
    Math.max(50, Math.floor(everyMs / 2)),
  );
  timer.unref();

  return {
    /** A watch whose access was confirmed just now; `lost` ends it when a later check finds none. */
    open(viewer: Viewer, sessionId: string | null, lost: (end: WatchEnd) => void): AccessTicket {
      const ticket: Ticket = {
        viewer,
        sessionId,
        freshUntil: Date.now() + everyMs,
        waiters: [],
        lost: (end) => {
          open.delete(ticket);
          lost(end);
          wake(ticket);
        },
      };
      open.add(ticket);
      return {
        admit() {
          if (Date.now() < ticket.freshUntil || !open.has(ticket)) return null;
          const settled = new Promise<void>((resolve) => ticket.waiters.push(resolve));
          // A confirmation under way settles it; otherwise the next check of every watch does.
          if (ticket.freshUntil !== 0) void check();
          return settled;
        },
        confirmKey() {
          const keyId = viewer.keyId;
          if (!keyId) return;
          const until = ticket.freshUntil;
          const confirmed = () => {
            if (!open.has(ticket)) return;
            ticket.freshUntil = Math.max(ticket.freshUntil, until);
            wake(ticket);
          };
          ticket.freshUntil = 0;
          // A check that fails (the database out of reach) counts as passed, as in `checkAll`.
          liveKeys.load(keyId).then((live) => (live ? confirmed() : ticket.lost(KEY_DELETED_END)), confirmed);
        },
        close() {
          open.delete(ticket);
          wake(ticket);
        },
      };
    },

    stop() {
      clearInterval(timer);
      for (const t of open) wake(t);
      open.clear();
    },
  };
}

export type AccessGate = ReturnType<typeof accessGate>;
