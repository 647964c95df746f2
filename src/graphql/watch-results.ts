import { GraphQLError } from 'graphql';
import type { Numbered } from '../domain/core/bus.ts';
import { isWatchEnd, type WatchEnd, type WatchItem } from '../domain/core/watch.ts';

/** The code each way a watch ends shows as in GraphQL (a removed watcher, a deleted key: FORBIDDEN). */
const endCodes: Record<WatchEnd['code'], string> = {
  SESSION_DELETED: 'SESSION_DELETED',
  ACCESS_REVOKED: 'FORBIDDEN',
  SLOW_CONSUMER: 'SLOW_CONSUMER',
  EVENTS_EXPIRED: 'EVENTS_EXPIRED',
  SHUTTING_DOWN: 'SHUTTING_DOWN',
};

/**
 * A subscription's `resolve` over a watch: each event as it is; an early end reaches the client
 * as an error with a code and the seq to resume after (`after: lastSeq`).
 */
export const deliver = <E extends Numbered>(item: WatchItem<E>): E => {
  if (!isWatchEnd(item)) return item;
  throw new GraphQLError(item.reason, { extensions: { code: endCodes[item.code], lastSeq: item.lastSeq } });
};
