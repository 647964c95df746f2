import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import type { EventsConfig } from '../config.ts';
import type { Numbered } from '../domain/core/bus.ts';
import { badInput } from '../domain/core/errors.ts';
import { isWatchEnd, type WatchEnd, type WatchStream, watchEndCodes } from '../domain/core/watch.ts';
import { type SseFrame, SseStream } from '../http/sse.ts';
import type { Metrics } from '../observability/metrics.ts';

/**
 * REST's event streams, whatever they carry (a session's events, a user's feed): SSE frames in
 * the original's framing, `{"event":"update","data":…}` with an `id:` line (the event's seq, for
 * Last-Event-ID), an `error` frame when the stream ends early, and `done` last.
 */

/** How event streams are written: heartbeats, the output allowed to wait for a client, and the metrics. */
export interface EventStreamContext {
  events: Pick<EventsConfig, 'heartbeatMs' | 'streamBufferBytes' | 'slowClientMs'>;
  streams: Metrics['streams'];
}

/** The frame of a stream that ends early (`id` names it in OpenAPI). */
export const endFrameSchema = (id: string) =>
  z
    .object({
      event: z.literal('error'),
      data: z.object({
        error: z.string(),
        code: z.enum(watchEndCodes),
        last_event_id: z.number().int().nullable().meta({ description: 'Resume after it with Last-Event-ID' }),
      }),
    })
    .meta({ id });

/** The last frame of every stream (`id` names it in OpenAPI). */
export const doneFrameSchema = (id: string) => z.object({ event: z.literal('done'), data: z.literal('') }).meta({ id });

type EndFrame = z.input<ReturnType<typeof endFrameSchema>>;

/** A stream that ends early says why, and from which event a client can resume. */
export const toRestEndFrame = (end: Pick<WatchEnd, 'code' | 'reason' | 'lastSeq'>): EndFrame => ({
  event: 'error',
  data: { error: end.reason, code: end.code, last_event_id: end.lastSeq },
});

export const DONE_FRAME: z.input<ReturnType<typeof doneFrameSchema>> = { event: 'done', data: '' };

/** Where a resumable stream starts: `?after=` (for clients that cannot set headers) ... */
export const resumeQuery = z.object({
  after: z.string().regex(/^\d+$/).optional().meta({ description: 'The id of the last event received (same as Last-Event-ID)' }),
});
/** ... or `Last-Event-ID`, which an EventSource sends by itself when it reconnects. */
export const resumeHeaders = z.object({ 'last-event-id': z.string().regex(/^\d+$/).optional() });

/** `Last-Event-ID` (or `?after=`): the seq of the last event the client received. */
export function resumePoint(header: unknown, query: unknown): number | undefined {
  const raw = typeof header === 'string' && header !== '' ? header : typeof query === 'string' && query !== '' ? query : undefined;
  if (raw === undefined) return undefined;
  if (!/^\d{1,16}$/.test(raw) || !Number.isSafeInteger(Number(raw)))
    throw badInput('Last-Event-ID (or after) must be the id of an event from this stream');
  return Number(raw);
}

/**
 * Named frames a stream sends beside its own (`event: <name>` lines, which an EventSource hands
 * only to listeners of that name, never to `onmessage`): the original's clients listen for some.
 */
export interface NamedFrames<E> {
  /** Sent first, once the watch is open. */
  opening?: () => Promise<Required<Pick<SseFrame, 'event' | 'data'>>[]>;
  /** Sent just before an event's own frame (that one carries the `id:`, so a resumed stream repeats this, never skips it). */
  before?: (event: E) => Promise<Required<Pick<SseFrame, 'event' | 'data'>> | null>;
}

/**
 * Writes a watch as SSE frames until it ends (the key is deleted, the server shuts down, ...),
 * the client leaves or stops reading; then `done`. `frameOf` gives an event's frame; it may
 * answer a promise where the frame needs a lookup, and answers at once otherwise, so a stream of
 * tokens waits on nothing per event. Leaving only stops this stream, never what it shows.
 */
export async function writeEventStream<E extends Numbered>(
  reply: FastifyReply,
  events: WatchStream<E> | null,
  context: EventStreamContext,
  frameOf: (event: E) => unknown,
  named: NamedFrames<E> = {},
) {
  const { heartbeatMs, streamBufferBytes: bufferBytes, slowClientMs } = context.events;
  const sse = new SseStream(reply, { heartbeatMs, bufferBytes, slowClientMs });
  const closed = context.streams.opened();
  let ended: Pick<WatchEnd, 'code' | 'reason' | 'lastSeq'> | null = null;
  let lastSeq: number | null = null;
  void sse.whenGone().then(() => events?.close());
  try {
    if (events) {
      for (const frame of (await named.opening?.()) ?? []) sse.send(frame);
      for (;;) {
        // A live stream's next event is usually taken as it comes, with no promise of its own.
        let item = events.poll();
        if (item === null) {
          await events.woken();
          continue;
        }
        if (item === undefined) {
          const r = await events.next();
          if (r.done) break;
          item = r.value;
        }
        if (isWatchEnd(item)) {
          ended = item;
          break;
        }
        const before = named.before && (await named.before(item));
        if (before) sse.send(before);
        const frame = frameOf(item);
        sse.send({ id: item.seq, data: frame instanceof Promise ? await frame : frame });
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
