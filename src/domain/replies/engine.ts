import type { LlmConfig } from '../../config.ts';
import type { Metrics } from '../../observability/metrics.ts';
import type { EventBus } from '../core/bus.ts';
import type { ChatProvider } from '../core/chat.ts';
import type { SessionEventPayload } from '../core/events.ts';
import { isRecordGone } from '../core/stores/prisma-errors.ts';
import { noMemory, noTools, type MemoryHost, type ToolHost } from '../core/tool-host.ts';
import { within } from '../core/within.ts';
import { answerPrompt } from './answer-prompt.ts';
import { endPaused, goOn } from './resume.ts';
import { CANCELLED, INTERRUPTED, ROLLED_BACK, replyEndings, SESSION_GONE, SHUTTING_DOWN } from './endings.ts';
import type { ReplyStore } from './ports.ts';
import type { ApprovalTimers, ReplyJob, ReplyRuntime } from './runtime.ts';
import { repliesEnded } from './waiting.ts';
import { createReplyWriter, type ReplyWriter } from './writer.ts';

const stopReasons = { cancelled: CANCELLED, deleted: SESSION_GONE, interrupted: INTERRUPTED, rolled_back: ROLLED_BACK } as const;
/**
 * How long a newer prompt's stop is remembered for a prompt not being answered here (yet): its
 * signal can come before the instance that saved that prompt has started its replies.
 */
const EARLY_STOP_MS = 60_000;

export type { ReplyJob } from './runtime.ts';

export interface ReplyEngineDeps {
  /** Where replies are read and saved (`store.ts` on the database). */
  store: ReplyStore;
  bus: EventBus;
  provider: ChatProvider;
  /** True for the offline responder: titles then come from the text, not from a model call. */
  offline: boolean;
  llm: LlmConfig;
  tools?: ToolHost;
  memory?: MemoryHost;
  /** This process, as recorded on the replies it writes (see `recovery.ts`). */
  instanceId: string;
  log: { error(obj: unknown, msg?: string): void };
  metrics: Metrics['replies'];
  /** Where streaming replies are saved; by default a write-behind queue on `store`. */
  writer?: ReplyWriter;
  /** Where the timeouts of calls that wait for approval are kept; none by default (they wait until answered). */
  approvals?: ApprovalTimers;
}

/**
 * Runs replies in the background: each agent's reply is a loop of model calls (a model call may
 * ask for tools, whose results feed the next call) streamed to the session's event bus, then
 * saved with its token usage. Replies outlive the request that started them: a client that
 * disconnects does not stop one. The parts: `answer-prompt.ts` (a prompt's replies),
 * `reply-loop.ts` (one reply's model calls and tool rounds), `endings.ts` (how a reply that did
 * not complete is saved and told); this file starts them, stops them and waits for them.
 */
export function createReplyEngine(deps: ReplyEngineDeps) {
  const { store, bus, log, metrics } = deps;
  /** Replies being written, by session: how to stop each prompt's replies. */
  const running = new Map<string, Set<{ promptId: string; controller: AbortController }>>();
  const active = new Set<Promise<void>>();
  const track = (task: Promise<void>) => {
    active.add(task);
    void task.finally(() => active.delete(task));
  };
  const housekeeping = new AbortController();
  const emit = (sessionId: string, event: SessionEventPayload) =>
    bus.publish(sessionId, event).catch((err) => log.error({ err }, 'could not publish a session event'));
  const endings = replyEndings({ store, emit, log, metrics });
  const rt: ReplyRuntime = {
    store,
    provider: deps.provider,
    offline: deps.offline,
    llm: deps.llm,
    tools: deps.tools ?? noTools,
    memory: deps.memory ?? noMemory,
    writer: deps.writer ?? createReplyWriter(store, log),
    log,
    metrics,
    emit,
    tell: (userId, event) => bus.feeds.publish(userId, event).catch((err) => log.error({ err }, 'could not publish a feed event')),
    approvals: deps.approvals ?? { schedule: async () => {} },
    fail: endings.fail,
    ended: repliesEnded(bus, store),
    track,
    housekeeping: housekeeping.signal,
  };

  function stop(sessionId: string, promptId: string | undefined, reason: symbol) {
    let stopped = 0;
    for (const entry of running.get(sessionId) ?? []) {
      if (promptId && entry.promptId !== promptId) continue;
      entry.controller.abort(reason);
      stopped++;
    }
    return stopped;
  }

  /** Stops newer prompts asked of prompts whose replies had not started here when they were asked, by prompt. */
  const earlyStops = new Map<string, symbol>();

  /**
   * Replies paused for approval are written by no instance: every instance hears a stop, and
   * the one that takes each (`claimPausedIn`) ends it as asked.
   */
  function endPausedReplies(sessionId: string, promptId: string | undefined, reason: symbol) {
    if (reason === SESSION_GONE) return;
    track(
      store
        .claimPausedIn(sessionId, promptId, deps.instanceId)
        .then((taken) => Promise.all(taken.map((paused) => endPaused(rt, paused, reason))))
        .then(() => {})
        .catch((err) => {
          if (!isRecordGone(err)) log.error({ err }, 'a paused reply could not be ended');
        }),
    );
  }

  /** Runs a reply's work here, stoppable by its prompt (a cancel, a newer prompt, shutdown). */
  function runHere(sessionId: string, promptId: string, work: (signal: AbortSignal) => Promise<unknown>, failure: string): Promise<void> {
    const entry = { promptId, controller: new AbortController() };
    const set = running.get(sessionId) ?? new Set();
    running.set(sessionId, set.add(entry));
    const early = earlyStops.get(promptId);
    if (early) entry.controller.abort(early);
    const done = work(entry.controller.signal)
      .then(() => {})
      .catch((err) => {
        if (!isRecordGone(err)) log.error({ err }, failure);
      })
      .finally(() => {
        set.delete(entry);
        if (set.size === 0) running.delete(sessionId);
      });
    track(done);
    return done;
  }

  // A cancel may be asked of any instance; the one writing the reply hears it here.
  bus.onCancelReplies(({ sessionId, promptId, reason }) => {
    endPausedReplies(sessionId, promptId, stopReasons[reason]);
    const stopped = stop(sessionId, promptId, stopReasons[reason]);
    if (stopped || !promptId || (reason !== 'interrupted' && reason !== 'rolled_back')) return;
    earlyStops.set(promptId, stopReasons[reason]);
    setTimeout(() => earlyStops.delete(promptId), EARLY_STOP_MS).unref();
  });

  return {
    /** Starts a prompt's replies in the background; resolves when every one has ended (never rejects). */
    start(job: ReplyJob): Promise<void> {
      return runHere(job.sessionId, job.promptId, (signal) => answerPrompt(rt, job, signal), 'a prompt could not be answered');
    },

    /**
     * Goes on with a reply paused for approval once none of its calls waits, here (whichever
     * instance's job queue handed it over), in the background as any reply; false when there is
     * nothing to take (still waiting, or taken already).
     */
    async resume(messageId: string): Promise<boolean> {
      const paused = await store.claimPaused(messageId, deps.instanceId);
      if (!paused) return false;
      void runHere(paused.job.sessionId, paused.job.promptId, (signal) => goOn(rt, paused, signal), 'a paused reply could not go on');
      return true;
    },

    /**
     * Lets running replies, and the memories of those that complete, finish for up to `graceMs`;
     * then cuts the rest off (replies saved as failed, memories not kept). Saves still waiting
     * for the database are given up: start-up recovery closes those replies.
     */
    async drain(graceMs: number) {
      endings.dropRetries();
      if (active.size === 0) return;
      const deadline = Date.now() + graceMs;
      // A reply that completes meanwhile sets off its memories: they are waited for too.
      while (active.size > 0 && Date.now() < deadline) await within(Promise.all(active), deadline - Date.now(), undefined);
      for (const set of running.values()) for (const entry of set) entry.controller.abort(SHUTTING_DOWN);
      housekeeping.abort(SHUTTING_DOWN);
      await Promise.all(active);
    },

    activeCount: () => active.size,
    instanceId: deps.instanceId,
  };
}

export type ReplyEngine = ReturnType<typeof createReplyEngine>;
