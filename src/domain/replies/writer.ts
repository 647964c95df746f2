import { isDatabaseUnavailable } from '../core/stores/prisma-errors.ts';
import type { MessageView } from '../core/events.ts';
import type { Checkpoint, Completion, ReplyStore, Title } from './ports.ts';

/**
 * Where streaming replies are saved. Writes are grouped: whatever many replies hand in while a
 * write is under way goes to the database together in the next one.
 */
export interface ReplyWriter {
  /** Saves the text so far, later; a newer checkpoint of the same reply replaces one not yet written. */
  checkpoint(entry: Checkpoint): void;
  /**
   * Saves a completed reply and counts its tokens on the session. Resolves with the saved message,
   * or null when it was no longer streaming (deleted, or closed by recovery).
   */
  complete(entry: Completion): Promise<MessageView | null>;
  /** Names a session that has no title yet. Resolves true if this title was saved. */
  title(sessionId: string, title: string): Promise<boolean>;
}

/** Replies per statement: bounds a statement's size (and the time the database spends on one). */
const GROUP = 500;

/** Saved replies handed back to their callers per turn of the event loop. */
const HAND_OUT = 8;

interface Pending<E, R> {
  entry: E;
  resolve(result: R): void;
  reject(e: unknown): void;
}

/**
 * A write-behind queue flushed by one loop: one statement saves the checkpoints due, one saves
 * the completed replies with their sessions' token counters, one reads the saved messages back
 * for their watchers, one names the sessions whose first exchange ended. At most one flush is in flight, so a thousand streaming replies cost the
 * database a few statements at a time instead of a thousand transactions queued behind each
 * other. None of it is an interactive transaction: a busy database makes a write wait, never fail.
 */
export function createReplyWriter(
  store: Pick<ReplyStore, 'saveCheckpoints' | 'saveCompletions' | 'nameSessions'>,
  log: { error(obj: unknown, msg?: string): void },
): ReplyWriter {
  const checkpoints = new Map<string, Checkpoint>();
  const completions = waiting<Completion, MessageView | null>();
  const titles = waiting<Title, boolean>();
  let flushing: Promise<void> | null = null;

  /**
   * Entries whose callers wait for what their write gave. When the database refuses a group for
   * what it holds (not for being away), each entry is tried alone: one reply's bad row must not
   * fail the hundreds grouped with it.
   */
  function waiting<E, R>() {
    const queue: Pending<E, R>[] = [];
    return {
      get size() {
        return queue.length;
      },
      add(entry: E) {
        return new Promise<R>((resolve, reject) => {
          queue.push({ entry, resolve, reject });
          wake();
        });
      },
      async write(save: (group: Pending<E, R>[]) => Promise<void>) {
        const group = queue.splice(0, GROUP);
        if (!group.length) return;
        await save(group).catch(async (err) => {
          if (group.length === 1 || isDatabaseUnavailable(err)) return group.forEach((p) => p.reject(err));
          for (const p of group) await save([p]).catch((alone) => p.reject(alone));
        });
      },
    };
  }

  async function saveCompletions(group: Pending<Completion, MessageView | null>[]) {
    const views = await store.saveCompletions(group.map((p) => p.entry));
    // Each save handed back sets off its reply's last events and its memory and title calls at
    // once. A few per turn of the event loop, so that the tokens of the replies still streaming
    // go out in between instead of waiting behind the whole group.
    for (let i = 0; i < group.length; i += HAND_OUT) {
      if (i > 0) await new Promise((resolve) => setImmediate(resolve));
      for (const p of group.slice(i, i + HAND_OUT)) p.resolve(views.get(p.entry.messageId) ?? null);
    }
  }

  async function saveTitles(group: Pending<Title, boolean>[]) {
    const named = await store.nameSessions(group.map((t) => t.entry));
    // Of several titles handed in for one session, the first was saved.
    for (const t of group) t.resolve(named.delete(t.entry.sessionId));
  }

  async function flushOnce() {
    const due = [...checkpoints.values()].slice(0, GROUP);
    for (const c of due) checkpoints.delete(c.messageId);
    if (due.length)
      // A checkpoint only keeps a crash from losing text: one that fails is skipped, the next one or the final save says it all.
      await store.saveCheckpoints(due).catch((err) => log.error({ err }, 'could not save reply checkpoints'));
    await completions.write(saveCompletions);
    await titles.write(saveTitles);
  }

  let scheduled = false;
  const pending = () => checkpoints.size > 0 || completions.size > 0 || titles.size > 0;

  function flush() {
    if (flushing) return;
    flushing = (async () => {
      // Work handed in while a flush runs waits for the next one: that is what groups it.
      while (pending()) await flushOnce();
    })().finally(() => {
      flushing = null;
      // Handed in between the loop's last look and now.
      if (pending()) wake();
    });
  }

  function wake() {
    if (flushing || scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      flush();
    });
  }

  return {
    checkpoint(entry) {
      checkpoints.set(entry.messageId, entry);
      wake();
    },
    complete(entry) {
      // The final save carries the whole text: a checkpoint still waiting would only repeat part of it.
      checkpoints.delete(entry.messageId);
      return completions.add(entry);
    },
    title: (sessionId, title) => titles.add({ sessionId, title }),
  };
}
