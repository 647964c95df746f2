import type { FastifyReply } from 'fastify';
import type { EventsConfig } from '../config.ts';
import type { Metrics } from '../observability/metrics.ts';
import { SseStream } from '../http/sse.ts';
import { isWatchEnd, type WatchEnd, type WatchStream } from '../domain/sessions/stream.ts';
import type { SenderDirectory, SenderLookup } from './senders.ts';
import { DONE_FRAME, senderOfFrame, toRestEndFrame, toRestFrame } from './session-shapes.ts';

export interface StreamContext {
  events: Pick<EventsConfig, 'heartbeatMs' | 'streamBufferBytes' | 'slowClientMs'>;
  streams: Metrics['streams'];
  /** Who wrote the messages frames carry (REST shows senders populated). */
  senders: SenderDirectory;
}

const NO_SENDERS: SenderLookup = new Map();

/**
 * Writes a session's events as SSE frames (with `id:` lines for Last-Event-ID) until the events
 * end (the session is deleted, the caller's key is deleted, ...), the client leaves or stops reading; then
 * `done`. The reply goes on without the client: leaving only stops this stream.
 */
export async function streamEvents(reply: FastifyReply, events: WatchStream | null, context: StreamContext) {
  const { heartbeatMs, streamBufferBytes: bufferBytes, slowClientMs } = context.events;
  const sse = new SseStream(reply, { heartbeatMs, bufferBytes, slowClientMs });
  const closed = context.streams.opened();
  let ended: Pick<WatchEnd, 'code' | 'reason' | 'lastSeq'> | null = null;
  let lastSeq: number | null = null;
  void sse.whenGone().then(() => events?.close());
  try {
    if (events) {
      for await (const item of events) {
        if (isWatchEnd(item)) {
          ended = item;
          break;
        }
        const sender = senderOfFrame(item);
        sse.send({ id: item.seq, data: toRestFrame(item, sender ? await context.senders.lookup([sender]) : NO_SENDERS) });
        lastSeq = item.seq;
        if (!sse.hasRoom && !(await sse.roomToWrite())) {
          if (!sse.closed)
            ended = { code: 'SLOW_CONSUMER', reason: 'The client stopped reading; reconnect with Last-Event-ID to resume', lastSeq };
          break;
        }
      }
    }
    if (ended) sse.send({ data: toRestEndFrame(ended) });
    sse.send({ data: DONE_FRAME });
  } finally {
    events?.close();
    sse.end();
    closed();
  }
}
