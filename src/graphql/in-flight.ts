import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { GraphQLContext } from './context.ts';

export const TOO_MANY_IN_FLIGHT = 'TOO_MANY_IN_FLIGHT';

/**
 * At most `limit` queries and mutations of one API key executing at once in this process, over
 * HTTP and every graphql-ws socket together. A rate limit counts what a key sends; this bounds
 * what it holds: a key flooding heavy operations (without reading the answers) gets the rest
 * refused at once instead of queueing work that keeps everyone else waiting. Operations without
 * a valid key run under the per-address rate limit only (they can read public fields alone).
 */
export function inFlightPerKey(limit: number): Plugin<GraphQLContext> {
  const executing = new Map<string, number>();
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const auth = (args.contextValue as GraphQLContext).auth;
      const keyId = 'viewer' in auth ? auth.viewer.keyId : undefined;
      if (!keyId) return;
      const now = executing.get(keyId) ?? 0;
      if (now >= limit) {
        setResultAndStopExecution({
          errors: [
            new GraphQLError(
              `Too many operations executing at once for this API key (at most ${limit}); wait for an answer before sending more`,
              { extensions: { code: TOO_MANY_IN_FLIGHT, http: { status: 429 } } },
            ),
          ],
        });
        return;
      }
      executing.set(keyId, now + 1);
      return {
        onExecuteDone() {
          const left = executing.get(keyId)! - 1;
          if (left) executing.set(keyId, left);
          else executing.delete(keyId);
        },
      };
    },
  };
}
