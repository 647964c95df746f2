import type { EventBus } from '../core/bus.ts';
import type { ToolCallChange } from '../core/events.ts';
import { isStreamEnd } from '../core/bus.ts';
import { failureOf, SHUTTING_DOWN } from './endings.ts';
import type { PromptOutcome, PromptOutcomes, SavedReply } from './ports.ts';
import { ABANDONED_REPLY } from './recovery.ts';

/** How often a prompt's replies are looked at in the database while their events are awaited (a lost event, a reply left by a dead instance). */
const RECHECK_MS = 2_000;

/** Replies that ended because their process stopped, not because of what was asked: worth asking again. */
const INTERRUPTED = new Set([ABANDONED_REPLY, failureOf(SHUTTING_DOWN).error]);

/** A prompt's replies as saved, and whether each ended only because its process stopped. */
export interface Outcome extends PromptOutcome {
  replies: (SavedReply & { interrupted: boolean })[];
}

/** What `awaitOutcome` waits for. */
export interface OutcomeWait {
  sessionId: string;
  promptId: string;
  /**
   * The session's event seq the prompt started after, to follow its replies' text from there;
   * null when the wait starts later (a reply taken over from another runner): only its end is awaited.
   */
  after: number | null;
  /** The replies' text as it grows (with `after` only), each time the whole of it so far. */
  onText?: (text: string) => void;
  /** Its tool calls that wait for approval, and that end (from when the wait follows them). */
  onToolCall?: (change: ToolCallChange) => void;
  /** Stops the wait: `awaitOutcome` then resolves to 'stopped'. */
  signal: AbortSignal;
}

/** How a wait for a prompt's replies ended: their outcome, the prompt gone (its session deleted), or stopped by the signal. */
export type WaitEnd = Outcome | 'gone' | 'stopped';

const ended = (o: PromptOutcome | null) => !o || o.replies.every((r) => r.status !== 'streaming');

/**
 * Reads how a prompt's replies stand (null: the prompt is gone), and follows them until they end:
 * the one way anything outside the replies (a deployment's chat, a trigger's run) waits for an
 * answer. The events show the text as it grows; the database is looked at every couple of
 * seconds too, so replies that end while no event reaches here (their instance died, the
 * subscription fell behind or ended) still end here.
 */
export function promptOutcomes(deps: { bus: Pick<EventBus, 'subscribe' | 'position'>; store: PromptOutcomes }) {
  async function outcome(promptId: string): Promise<Outcome | null> {
    const saved = await deps.store.promptOutcome(promptId);
    if (!saved) return null;
    const interrupted = (r: SavedReply) => r.status === 'failed' && INTERRUPTED.has(r.error ?? '');
    return { ...saved, replies: saved.replies.map((r) => ({ ...r, interrupted: interrupted(r) })) };
  }

  const settled = async (promptId: string): Promise<WaitEnd> => (await outcome(promptId)) ?? 'gone';

  async function awaitOutcome({ sessionId, promptId, after, onText, onToolCall, signal }: OutcomeWait): Promise<WaitEnd> {
    if (signal.aborted) return 'stopped';
    const from = after ?? (await deps.bus.position(sessionId));
    if (after === null) {
      const now = await outcome(promptId);
      if (ended(now)) return now ?? 'gone';
    }
    const subscription = deps.bus.subscribe(sessionId, { after: from });
    const stopped = new Promise<'stopped'>((resolve) => {
      if (signal.aborted) resolve('stopped');
      signal.addEventListener('abort', () => resolve('stopped'), { once: true });
    });
    let text = '';
    let next: ReturnType<typeof subscription.next> | null = subscription.next();
    try {
      while (!signal.aborted) {
        let timer: NodeJS.Timeout | undefined;
        const tick = new Promise<'tick'>((resolve) => (timer = setTimeout(() => resolve('tick'), RECHECK_MS)));
        const got = await Promise.race([next ?? new Promise<never>(() => {}), tick, stopped]);
        clearTimeout(timer);
        if (got === 'stopped') return 'stopped';
        if (got === 'tick') {
          const now = await outcome(promptId);
          if (ended(now)) return now ?? 'gone';
          continue;
        }
        if (got.done || isStreamEnd(got.value)) {
          // Ended early (slow, replay expired, the bus closing): the database alone says when it is over.
          next = null;
          continue;
        }
        next = subscription.next();
        const event = got.value;
        if (event.type === 'session_deleted') break;
        if (!('promptId' in event) || event.promptId !== promptId) continue;
        if (event.type === 'end_prompt') break;
        if (event.type === 'tool_approval_requested')
          onToolCall?.({ type: 'approval_requested', toolCall: event.toolCall, expiresAt: event.expiresAt });
        else if (event.type === 'tool_approval_settled') onToolCall?.({ type: 'approval_settled', toolCall: event.toolCall });
        else if (event.type === 'tool_complete' || event.type === 'tool_cancelled')
          onToolCall?.({ type: 'ended', toolCall: event.toolCall });
        if (after === null || !onText) continue;
        if (event.type === 'assistant_token') text += event.text;
        else if (event.type === 'assistant_message') text = event.message.content;
        else continue;
        onText(text);
      }
    } finally {
      subscription.close();
    }
    return signal.aborted ? 'stopped' : settled(promptId);
  }

  return { outcome, awaitOutcome };
}

export type PromptOutcomeService = ReturnType<typeof promptOutcomes>;
