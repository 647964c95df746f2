import type { MediaLinks } from '../core/media-links.ts';
import type { ChatReply } from './ports.ts';

/** Links to what the reply's tools made (images), which a chat cannot see otherwise; ours made absolute. */
function mediaLinks(toolCalls: ChatReply['toolCalls'], absolute: MediaLinks): string[] {
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
export function answerText(reply: ChatReply | null, links: MediaLinks): string {
  if (!reply) return 'Sorry, something went wrong before I could answer.';
  const body = [reply.content.trim(), ...mediaLinks(reply.toolCalls, links)].filter(Boolean).join('\n\n');
  if (reply.status === 'complete') return body || '…';
  const why =
    reply.status === 'cancelled' || reply.status === 'interrupted' ? 'the answer was stopped' : (reply.error ?? 'the answer failed');
  return body ? `${body}\n\n(${why})` : `Sorry, I could not answer: ${why}`;
}
