import type { EventBus } from '../core/bus.ts';
import { isStreamEnd } from '../core/bus.ts';
import type { MediaLinks } from '../core/media-links.ts';
import { failureOf, SHUTTING_DOWN } from '../replies/endings.ts';
import { ABANDONED_REPLY } from '../replies/recovery.ts';
import type { DeploymentRuntimeStore, PromptState } from './runtime-store.ts';

/** How often a reply is looked at in the database while its events are awaited (a lost event, a reply left by a dead instance). */
const RECHECK_MS = 2_000;

/** Replies that ended because their process stopped, not because of what was asked: answered again. */
const INTERRUPTED = new Set([ABANDONED_REPLY, failureOf(SHUTTING_DOWN).error]);

type Reply = NonNullable<PromptState['reply']>;

export const isInterrupted = (reply: PromptState['reply']) => reply?.status === 'failed' && INTERRUPTED.has(reply.error ?? '');

const isDone = (state: PromptState | null) => state?.reply?.status !== 'streaming';

/** Links to what the reply's tools made (images), which a chat cannot see otherwise; ours made absolute. */
function mediaLinks(toolCalls: Reply['toolCalls'], absolute: MediaLinks): string[] {
  const links: string[] = [];
  const walk = (value: unknown, depth: number) => {
    if (depth > 4 || value === null || typeof value !== 'object') return;
    if (Array.isArray(value)) return value.forEach((v) => walk(v, depth + 1));
    for (const [key, v] of Object.entries(value)) {
      if (key === 'url' && typeof v === 'string' && /^https?:\/\//.test(v)) links.push(v);
      else walk(v, depth + 1);
    }
  };
  for (const call of toolCalls) if (call.status === 'completed') walk(absolute.absoluteIn(call.result), 0);
  return [...new Set(links)];
}

/** What the chat is finally shown for a reply: its text and media, or why there is none. */
export function answerText(reply: PromptState['reply'], links: MediaLinks): string {
  if (!reply) return 'Sorry, something went wrong before I could answer.';
  const body = [reply.content.trim(), ...mediaLinks(reply.toolCalls, links)].filter(Boolean).join('\n\n');
  if (reply.status === 'complete') return body || '…';
  const why = reply.status === 'cancelled' ? 'the answer was stopped' : (reply.error ?? 'the answer failed');
  return body ? `${body}\n\n(${why})` : `Sorry, I could not answer: ${why}`;
}

/**
 * Follows the reply to a prompt until it ends, showing its text as it grows when the events
 * are followed from the prompt's start (`after`, its start event's seq); without it (a reply
 * taken over from another runner) only its end is awaited. The database is looked at every
 * couple of seconds too, so a reply that ends while no event reaches here (its instance died,
 * the subscription fell behind) still ends here. Returns the reply as saved, or null when
 * `signal` stopped the wait.
 */
export async function followReply(
  deps: { bus: EventBus; store: Pick<DeploymentRuntimeStore, 'promptState'> },
  at: { sessionId: string; promptId: string; after: number | null },
  show: (text: string) => void,
  signal: AbortSignal,
): Promise<PromptState | null> {
  const after = at.after ?? (await deps.bus.position(at.sessionId));
  if (at.after === null) {
    const state = await deps.store.promptState(at.promptId);
    if (isDone(state)) return state;
  }
  const subscription = deps.bus.subscribe(at.sessionId, { after });
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
      if (got === 'stopped') return null;
      if (got === 'tick') {
        const state = await deps.store.promptState(at.promptId);
        if (isDone(state)) return state;
        continue;
      }
      if (got.done || isStreamEnd(got.value)) {
        // Ended early (slow, replay expired, the bus closing): the database alone says when it is over.
        next = null;
        continue;
      }
      next = subscription.next();
      const event = got.value;
      if (!('promptId' in event) || event.promptId !== at.promptId) continue;
      if (event.type === 'end_prompt') break;
      if (at.after === null) continue;
      if (event.type === 'assistant_token') text += event.text;
      else if (event.type === 'assistant_message') text = event.message.content;
      else continue;
      show(text);
    }
  } finally {
    subscription.close();
  }
  return signal.aborted ? null : deps.store.promptState(at.promptId);
}
