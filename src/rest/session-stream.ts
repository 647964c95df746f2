import type { FastifyReply } from 'fastify';
import type { SessionEvent } from '../domain/core/events.ts';
import type { WatchStream } from '../domain/core/watch.ts';
import { type EventStreamContext, writeEventStream } from './event-stream.ts';
import type { SenderDirectory, SenderLookup } from './senders.ts';
import { senderOfFrame, toRestFrame } from './session-shapes.ts';

export interface StreamContext extends EventStreamContext {
  /** Who wrote the messages frames carry (REST shows senders populated). */
  senders: SenderDirectory;
}

const NO_SENDERS: SenderLookup = new Map();

/**
 * Writes a session's events as SSE frames (with `id:` lines for Last-Event-ID) until the events
 * end (the session is deleted, the caller's key is deleted, ...), the client leaves or stops
 * reading; then `done`. The reply goes on without the client: leaving only stops this stream.
 */
export function streamEvents(reply: FastifyReply, events: WatchStream | null, context: StreamContext) {
  return writeEventStream(reply, events, context, (item: SessionEvent) => {
    // Only frames carrying a message wait for its sender; a token's frame is written at once.
    const sender = senderOfFrame(item);
    return sender ? context.senders.lookup([sender]).then((senders) => toRestFrame(item, senders)) : toRestFrame(item, NO_SENDERS);
  });
}
