import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isWatchEnd } from '../domain/core/watch.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import type { Services } from '../domain/services.ts';

/** Tells the caller how a call is going (a token of the reply, a task's step). */
export type Progress = (message: string) => void;

/**
 * A message sent as `POST /v2/sessions` with `stream: true` sends it (the same prompt, its
 * stream slot, its key confirmed), its reply's tokens told as progress as they come, and its
 * replies' final texts the result. The caller leaving (`signal`) stops the watch, not the reply,
 * as a REST client leaving does.
 */
export async function talk(
  services: Services,
  viewer: Viewer,
  input: { agentIds?: string[]; sessionId?: string; content: string },
  progress: Progress,
  signal: AbortSignal,
): Promise<CallToolResult> {
  const { started, events } = await services.sessions.sendAndWatch(viewer, input);
  if (!events) return { content: [{ type: 'text', text: 'Nothing was sent' }], structuredContent: { sessionId: started.sessionId } };
  const stop = () => events.close();
  signal.addEventListener('abort', stop, { once: true });
  const replies: { agentId: string; messageId: string; content: string }[] = [];
  const errors: string[] = [];
  try {
    for await (const event of events) {
      if (isWatchEnd(event)) {
        errors.push(event.reason);
        break;
      }
      if (event.type === 'assistant_token') progress(event.text);
      if (event.type === 'assistant_message')
        replies.push({ agentId: event.agentId, messageId: event.message.id, content: event.message.content });
      if (event.type === 'error') errors.push(event.error);
    }
  } finally {
    signal.removeEventListener('abort', stop);
    events.close();
  }
  const text = replies.map((r) => r.content).join('\n\n');
  return {
    content: [{ type: 'text', text: errors.length && !replies.length ? errors.join('\n') : text }],
    structuredContent: { sessionId: started.sessionId, promptId: started.promptId, replies, errors },
    ...(errors.length && !replies.length ? { isError: true } : {}),
  };
}
