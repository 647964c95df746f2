import type { FastifyReply } from 'fastify';
import type { SessionEvent, SessionEventOf } from '../domain/core/events.ts';
import type { MediaLinks } from '../domain/core/media-links.ts';
import type { WatchStream } from '../domain/core/watch.ts';
import { JsonText } from '../http/sse.ts';
import { type EventStreamContext, writeEventStream } from './event-stream.ts';
import type { SenderDirectory, SenderLookup } from './senders.ts';
import { senderOfFrame, toRestFrame } from './session-shapes.ts';

export interface StreamContext extends EventStreamContext {
  /** Who wrote the messages frames carry (REST shows senders populated). */
  senders: SenderDirectory;
  /** The links frames carry (tools' results), made absolute. */
  links: MediaLinks;
}

const NO_SENDERS: SenderLookup = new Map();

/**
 * Writes a session's events as SSE frames (with `id:` lines for Last-Event-ID) until the events
 * end (the session is deleted, the caller's key is deleted, ...), the client leaves or stops
 * reading; then `done`. The reply goes on without the client: leaving only stops this stream.
 */
export function streamEvents(reply: FastifyReply, events: WatchStream | null, context: StreamContext) {
  const tokenFrame = tokenFrames(context.links);
  return writeEventStream(reply, events, context, (item: SessionEvent) => {
    if (item.type === 'assistant_token' || item.type === 'assistant_thinking') return tokenFrame(item);
    // Only frames carrying a message wait for its sender; a token's frame is written at once.
    const sender = senderOfFrame(item);
    return sender
      ? context.senders.lookup([sender]).then((senders) => toRestFrame(item, senders, context.links))
      : toRestFrame(item, NO_SENDERS, context.links);
  });
}

type StreamedText = SessionEventOf<'assistant_token' | 'assistant_thinking'>;

/**
 * The frames of a stream's tokens, each written as JSON from the one before: the tokens of a
 * reply have the same frame but for their text, which comes last, so only the text is written
 * anew. The same JSON as `toRestFrame`'s frame gives, a token a time, without its objects.
 */
export function tokenFrames(links: MediaLinks) {
  let last: { of: StreamedText; head: string } | null = null;
  const sameReply = (a: StreamedText, b: StreamedText) =>
    a.type === b.type && a.sessionId === b.sessionId && a.promptId === b.promptId && a.messageId === b.messageId && a.agentId === b.agentId;
  return (e: StreamedText) => {
    if (last && sameReply(last.of, e)) return new JsonText(`${last.head}${JSON.stringify(e.text)}}}`);
    const frame = toRestFrame(e, NO_SENDERS, links);
    const whole = JSON.stringify(frame);
    const tail = `${JSON.stringify(e.text)}}}`;
    last = whole.endsWith(tail) ? { of: e, head: whole.slice(0, -tail.length) } : null;
    return frame;
  };
}
