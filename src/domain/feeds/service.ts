import { type BusItem, type EventBus, isStreamEnd } from '../core/bus.ts';
import { badInput } from '../core/errors.ts';
import type { FeedEvent, FeedEventOf, FeedEventType } from '../core/feed-events.ts';
import type { StreamLimits } from '../core/stream-limits.ts';
import type { Viewer } from '../core/viewer.ts';
import { KEY_DELETED_END, type WatchGate, type WatchStep, type WatchStream, watchStream } from '../core/watch.ts';

export interface FeedWatchOptions<T extends FeedEventType> {
  /** Every retained event after this seq first, then live (`after`, `Last-Event-ID`); without it, from now. */
  after?: number;
  /** Only events of these types (a family: `feedFamilies.task`); without it, every type. */
  types?: readonly T[];
  /** Only the events this accepts (one task's, one trigger's). */
  where?: (event: FeedEventOf<T>) => boolean;
}

/** What the feed rules run on: the bus, the key's stream slots, and the gate that keeps watches' keys confirmed. */
export interface FeedPorts {
  bus: EventBus;
  limits: StreamLimits;
  gate: WatchGate;
}

/**
 * Shows the events `types` and `where` accept. Events passed over still count as seen: a watch
 * ending early names the last seq of the feed it got past, and resuming from there skips them
 * again rather than reading them twice.
 */
function feedWatchStep<T extends FeedEventType>(options: FeedWatchOptions<T>) {
  const types = options.types ? new Set<FeedEventType>(options.types) : null;
  const { where } = options;
  let lastSeq: number | null = null;
  return (item: BusItem<FeedEvent>): WatchStep<FeedEventOf<T>> => {
    if (isStreamEnd(item)) return { emit: { ...item, lastSeq: item.lastSeq ?? lastSeq }, stop: true };
    lastSeq = item.seq;
    if (types && !types.has(item.type)) return {};
    const event = item as FeedEventOf<T>;
    return where && !where(event) ? {} : { emit: event };
  };
}

/**
 * A user's own feed: the changes to their triggers, tasks and deployments, live. The rule is
 * that a watch is only ever of the caller's own feed: there is no way to name another user's,
 * so a feature checks nothing more than what narrows it (a task id that must be the caller's,
 * say) before it calls `watch`. It reads nothing from the database itself (the gate confirms
 * the key), so it has no store.
 */
export function feedService({ bus, limits, gate }: FeedPorts) {
  return {
    /**
     * The caller's feed from `after` (or from now), narrowed to `types` and `where`. It ends with
     * the bus's reasons, or ACCESS_REVOKED when the key it was opened with is deleted; it holds
     * one of the key's subscription slots until it ends (TOO_MANY_SUBSCRIPTIONS when none is left).
     */
    async watch<T extends FeedEventType = FeedEventType>(
      viewer: Viewer,
      options: FeedWatchOptions<T> = {},
    ): Promise<WatchStream<FeedEventOf<T>>> {
      if (options.after !== undefined && !(Number.isSafeInteger(options.after) && options.after >= 0))
        throw badInput('must be the seq of an event of your feed', ['after']);
      // Fixed first: nothing published from the moment the caller asked is missed, however long
      // the slot takes.
      const after = options.after ?? (await bus.feeds.position(viewer.id));
      const release = await limits.hold(viewer, 'subscription');
      let stopListening = () => {};
      const ticket = gate.open(viewer, null, (end) => stream.interrupt(end));
      const stream = watchStream(
        bus.feeds.subscribe(viewer.id, { after }),
        feedWatchStep(options),
        () => {
          stopListening();
          ticket.close();
          release();
        },
        ticket.admit,
      );
      // A deleted API key ends what was opened with it, on every transport; one deleted before
      // this listener was in place is caught by looking it up once more.
      stopListening = bus.onKeyRevoked((keyId) => {
        if (keyId === viewer.keyId) stream.interrupt(KEY_DELETED_END);
      });
      ticket.confirmKey();
      return stream;
    },
  };
}

export type FeedService = ReturnType<typeof feedService>;
