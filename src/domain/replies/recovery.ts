import type { EventBus } from '../core/bus.ts';
import type { AbandonedReplies, RecoveredReply, RecoveryStore } from './ports.ts';

export type { RecoveredReply } from './ports.ts';

export const ABANDONED_REPLY = 'The server stopped before the reply was finished';
const ABANDONED_TOOL = 'The server stopped before the tool finished';

export interface RecoveryOptions {
  /** Only replies written by this instance (one known to be gone). */
  instanceId?: string;
  /**
   * Only replies not saved since this time. A streaming reply's text is saved every
   * `REPLY_CHECKPOINT_MS`, but not while it waits for a tool: the bound must exceed the longest
   * tool call, or a live reply may be closed.
   */
  olderThan?: Date;
  /** Watchers of the sessions are told through it: an `error` per reply, then `end_prompt`. */
  bus?: EventBus;
}

/** Sessions looked at per round; the rounds go on until nothing is left. */
const BATCH = 200;

/**
 * Closes replies that a process stopped writing (it was killed, or crashed): each is saved as
 * failed with the text it had saved so far, its running tool calls are cancelled and their holds
 * refunded, and calls it had not started are cancelled. Without options every streaming reply is
 * taken, which is right only when no other process can be writing one (a single instance, at
 * start). Safe to run from several instances at once: each session is locked while its replies
 * are closed (before its tool calls, in the order settling takes them), and only replies still
 * `streaming` change, so each is closed, and each hold refunded, exactly once.
 */
export async function recoverAbandonedReplies(store: RecoveryStore, options: RecoveryOptions = {}): Promise<RecoveredReply[]> {
  const which: AbandonedReplies = { instanceId: options.instanceId, olderThan: options.olderThan };
  const errors = { reply: ABANDONED_REPLY, tool: ABANDONED_TOOL };
  const recovered: RecoveredReply[] = [];
  // Closed replies no longer match, so each round finds the next sessions; a round that closes
  // nothing (another instance got there first) ends it.
  for (let closing = true; closing; ) {
    const sessions = await store.sessionsWithAbandoned(which, BATCH);
    closing = false;
    for (const sessionId of sessions) {
      const closed = await store.closeAbandoned(sessionId, which, errors);
      closing ||= closed.length > 0;
      recovered.push(...closed);
    }
  }
  if (options.bus) await announce(options.bus, recovered);
  return recovered;
}

async function announce(bus: EventBus, recovered: RecoveredReply[]) {
  const prompts = new Map<string, string>();
  for (const r of recovered) {
    if (!r.promptId || !r.agentId) continue;
    await bus.publish(r.sessionId, { type: 'error', promptId: r.promptId, agentId: r.agentId, error: ABANDONED_REPLY, message: r.message });
    prompts.set(r.promptId, r.sessionId);
  }
  for (const [promptId, sessionId] of prompts) await bus.publish(sessionId, { type: 'end_prompt', promptId });
}

export interface DeadInstanceWatch {
  /** This instance: its own replies are never taken. */
  self: string;
  /** Of these instance ids, the ones known to be gone. */
  gone(instanceIds: string[]): Promise<string[]>;
  bus: EventBus;
  everyMs: number;
  log: { error(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void };
}

/**
 * For instances sharing a database: every `everyMs`, replies still `streaming` whose instance is
 * gone are closed and announced, so their watchers and sessions recover without waiting for that
 * instance to come back. Every instance looks; recovery is safe to run from several at once.
 */
export function watchForDeadInstances(store: RecoveryStore, watch: DeadInstanceWatch): () => void {
  let running: Promise<void> | null = null;
  const look = async () => {
    const ids = await store.streamingInstances(watch.self);
    for (const instanceId of await watch.gone(ids)) {
      const closed = await recoverAbandonedReplies(store, { instanceId, bus: watch.bus });
      if (closed.length)
        watch.log.warn(
          { instance: instanceId, replies: closed.map((r) => r.message.id) },
          `${closed.length} replies left unfinished by a stopped instance were saved as failed`,
        );
    }
  };
  const timer = setInterval(() => {
    running ??= look()
      .catch((err) => watch.log.error({ err }, 'could not look for replies of stopped instances'))
      .finally(() => (running = null));
  }, watch.everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
