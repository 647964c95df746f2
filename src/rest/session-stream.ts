import type { FastifyReply } from 'fastify';
import type { EventBus } from '../realtime/bus.ts';
import { SseStream } from '../realtime/sse.ts';
import { isWatchEnd, type WatchItem } from '../domain/sessions/stream.ts';
import type { Viewer } from '../domain/viewer.ts';
import { DONE_FRAME, toRestEndFrame, toRestFrame } from './session-shapes.ts';

type Events = AsyncIterableIterator<WatchItem> & { close(): void };

/**
 * Writes a session's events as SSE frames (with `id:` lines for Last-Event-ID) until the events
 * end, the client leaves, or the caller's API key is deleted; then `done`. The reply goes on
 * without the client: leaving only stops this stream.
 */
export async function streamEvents(reply: FastifyReply, events: Events | null, context: { viewer: Viewer; bus: EventBus; heartbeatMs: number }) {
  const sse = new SseStream(reply, context.heartbeatMs);
  let revoked = false;
  const stopWatching = context.bus.onKeyRevoked((keyId) => {
    if (keyId !== context.viewer.keyId) return;
    revoked = true;
    events?.close();
  });
  void sse.whenGone().then(() => events?.close());
  try {
    if (events) {
      for await (const item of events) {
        if (isWatchEnd(item)) await sse.send({ data: toRestEndFrame(item) });
        else await sse.send({ id: item.seq, data: toRestFrame(item) });
      }
    }
    if (revoked) await sse.send({ data: toRestEndFrame({ code: 'ACCESS_REVOKED', reason: 'The API key of this stream was deleted', lastSeq: null }) });
    await sse.send({ data: DONE_FRAME });
  } finally {
    stopWatching();
    sse.end();
  }
}
