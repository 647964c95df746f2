import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { GraphQLContext } from './context.ts';

export const TOO_MANY_IN_FLIGHT = 'TOO_MANY_IN_FLIGHT';

/**
 * Queries and mutations of each API key under way in this process, over HTTP and every
 * graphql-ws socket together, at most `limit` at once. A rate limit counts what a key sends;
 * this bounds what it holds: a key flooding heavy operations (without reading the answers) gets
 * the rest refused at once, before they are parsed or run, instead of queueing work that keeps
 * everyone else waiting.
 */
export function inFlightCounter(limit: number) {
  const running = new Map<string, number>();
  return {
    limit,
    /** Takes a place for one operation of the key; false when it has `limit` under way already. */
    take(keyId: string): boolean {
      const now = running.get(keyId) ?? 0;
      if (now >= limit) return false;
      running.set(keyId, now + 1);
      return true;
    },
    give(keyId: string) {
      const left = (running.get(keyId) ?? 1) - 1;
      if (left > 0) running.set(keyId, left);
      else running.delete(keyId);
    },
    /** The refusal; over HTTP it answers 429. */
    error: (overHttp: boolean) =>
      new GraphQLError(
        `Too many operations under way at once for this API key (at most ${limit}); wait for an answer before sending more`,
        {
          extensions: { code: TOO_MANY_IN_FLIGHT, ...(overHttp ? { http: { status: 429 } } : {}) },
        },
      ),
  };
}

export type InFlightCounter = ReturnType<typeof inFlightCounter>;

/**
 * The count for operations over HTTP, from the start of their execution to its end. graphql-ws
 * operations are counted by the socket server from the moment they arrive (`countedBySocket`
 * in their context), since a socket can send thousands before the first one runs.
 */
export function inFlightPerKey(counter: InFlightCounter): Plugin<GraphQLContext & { countedBySocket?: boolean }> {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const context = args.contextValue as GraphQLContext & { countedBySocket?: boolean };
      const keyId = 'viewer' in context.auth ? context.auth.viewer.keyId : undefined;
      if (!keyId || context.countedBySocket) return;
      if (!counter.take(keyId)) return void setResultAndStopExecution({ errors: [counter.error(true)] });
      return { onExecuteDone: () => counter.give(keyId) };
    },
  };
}
