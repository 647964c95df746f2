import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import type { FeedEvent } from '../domain/core/feed-events.ts';
import type { WatchStream } from '../domain/core/watch.ts';
import { doneFrameSchema, endFrameSchema, type EventStreamContext, type NamedFrames, writeEventStream } from './event-stream.ts';

/**
 * A feature's event stream over the caller's feed (`GET /v2/tasks/events`, say): the route gets
 * the watch from `services.feeds.watch` (resumed from `resumePoint`) and hands it here with how
 * an event shows in REST. Frames, ids, ends and slow clients are those of every REST stream.
 */
export function streamFeed<E extends FeedEvent>(
  reply: FastifyReply,
  events: WatchStream<E>,
  context: EventStreamContext,
  toData: (event: E) => unknown,
  named?: NamedFrames<E>,
): Promise<FastifyReply> {
  return writeEventStream(reply, events, context, (event) => ({ event: 'update', data: toData(event) }), named).then(() => reply);
}

/**
 * The frames of a feed's stream for OpenAPI (`ok: { events }`): `update` frames whose `data` is
 * `data` (what `toData` gives), then the `error` and `done` frames of every stream, named after
 * `name` (`TaskStream` → `TaskStreamFrame`, `TaskStreamUpdateFrame`, ...).
 */
export const feedFrameSchema = (name: string, data: z.ZodType) =>
  z
    .union([
      z.object({ event: z.literal('update'), data }).meta({ id: `${name}UpdateFrame` }),
      endFrameSchema(`${name}EndFrame`),
      doneFrameSchema(`${name}DoneFrame`),
    ])
    .meta({ id: `${name}Frame` });
