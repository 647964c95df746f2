import type { Numbered, StreamEnd } from '../domain/core/bus.ts';
import type { SessionEvent, SessionEventPayload } from '../domain/core/events.ts';
import type { FeedEvent, FeedEventPayload } from '../domain/core/feed-events.ts';

/** How a bus ends a subscription early, in the words clients see. */
export interface Ends {
  shuttingDown(lastSeq: number | null): StreamEnd;
  slowConsumer(lastSeq: number | null): StreamEnd;
  expired(after: number): StreamEnd;
  unstored(lastSeq: number | null): StreamEnd;
  unreadable(lastSeq: number | null): StreamEnd;
}

/** The end reasons of a kind of channel; `reread` says what a client reads again to catch up. */
const endsFor = (reread: string): Ends => ({
  shuttingDown: (lastSeq) => ({ end: true, code: 'SHUTTING_DOWN', reason: 'The server is shutting down; reconnect to resume', lastSeq }),
  slowConsumer: (lastSeq) => ({
    end: true,
    code: 'SLOW_CONSUMER',
    reason: `The client fell so far behind that the events it missed are gone; ${reread}`,
    lastSeq,
  }),
  expired: (after) => ({
    end: true,
    code: 'EVENTS_EXPIRED',
    reason: `Events after ${after} are no longer available; ${reread} and subscribe without "after"`,
    lastSeq: after,
  }),
  unstored: (lastSeq) => ({
    end: true,
    code: 'EVENTS_EXPIRED',
    reason: `Events this stream showed could not be stored; ${reread} and subscribe again`,
    lastSeq,
  }),
  unreadable: (lastSeq) => ({
    end: true,
    code: 'EVENTS_EXPIRED',
    reason: `The event log could not be read; ${reread} and subscribe again`,
    lastSeq,
  }),
});

/**
 * What the bus machinery (`subscription.ts`, both buses, the Redis publisher) needs to know of a
 * kind of channel; everything else (numbering, replay, leases, ends) is the same for every kind.
 */
export interface ChannelKind<P extends { type: string }, E extends Numbered> {
  /** In words, for errors: "session". */
  readonly noun: string;
  /** Where its keys live in Redis (`<space>:seq:{id}`, ...) and its live pub/sub channels. */
  readonly space: string;
  readonly ends: Ends;
  /** The event as published: its payload, its time, its channel and its seq. */
  stamp(id: string, payload: P, seq: number, at: string): E;
  /** The channel an event was published on. */
  channelOf(event: E): string;
  /** About the bytes an event holds, for the replay window's byte budget. */
  sizeOf(event: E): number;
  /** Events published many a second (a reply's tokens): publishing one asks for the channel's lease. */
  streamed(payload: P): boolean;
}

/** Above what the fields of a streamed piece of text other than the text take in JSON (ids, seq, time). */
const STREAMED_TEXT_OVERHEAD = 320;

/**
 * Sessions: their keys keep the names they had before feeds existed (`parley:seq:{id}`), so
 * instances of an older release sharing the Redis keep numbering the same logs.
 */
export const sessionKind: ChannelKind<SessionEventPayload, SessionEvent> = {
  noun: 'session',
  space: 'parley',
  ends: endsFor('read the session again'),
  // Written out for sessions alone, so that the shape of every token event stays the one V8 knows.
  stamp: (id, payload, seq, at) => ({ ...payload, at, seq, sessionId: id }) as SessionEvent,
  channelOf: (event) => event.sessionId,
  // Estimated for the pieces of text a reply streams (nearly every event, and nearly all of each
  // is its text) instead of written out for each.
  sizeOf: (event) =>
    event.type === 'assistant_token' || event.type === 'assistant_thinking'
      ? STREAMED_TEXT_OVERHEAD + event.text.length
      : JSON.stringify(event).length,
  streamed: (payload) => payload.type === 'assistant_token' || payload.type === 'assistant_thinking',
};

/** Users' feeds: a key space of their own, so a user's id can never name a session's log. */
export const feedKind: ChannelKind<FeedEventPayload, FeedEvent> = {
  noun: 'feed',
  space: 'parley:feed',
  ends: endsFor('read the current state again'),
  stamp: (id, payload, seq, at) => ({ ...payload, at, seq, userId: id }) as FeedEvent,
  channelOf: (event) => event.userId,
  sizeOf: (event) => JSON.stringify(event).length,
  // A task reports progress many times a second: its instance numbers the feed meanwhile, as a reply's does a session.
  streamed: (payload) => payload.type === 'task_progress',
};
