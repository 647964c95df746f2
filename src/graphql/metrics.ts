import { getOperationAST, type DocumentNode } from 'graphql';
import { isAsyncIterable, type Plugin } from 'graphql-yoga';
import type { Metrics } from '../observability/metrics.ts';

/**
 * Counts operations as the envelope runs them, so GraphQL over HTTP and over graphql-ws are
 * counted alike: queries and mutations with their execution time, subscriptions while they run.
 * Documents that fail to parse or validate never execute and are not counted here (their HTTP
 * request is).
 */
export function graphqlMetrics(metrics: Metrics['graphql']): Plugin {
  const describe = (document: DocumentNode, operationName: string | null | undefined) => {
    const operation = getOperationAST(document, operationName);
    return { name: metrics.operationLabel(operation?.name?.value), type: operation?.operation ?? 'unknown' };
  };
  return {
    onExecute({ args }) {
      const started = performance.now();
      const { name, type } = describe(args.document, args.operationName);
      return {
        onExecuteDone({ result }) {
          const failed = !isAsyncIterable(result) && Boolean(result.errors?.length);
          metrics.executed(name, type, failed, (performance.now() - started) / 1000);
        },
      };
    },
    onSubscribe({ args }) {
      const { name } = describe(args.document, args.operationName);
      return {
        onSubscribeResult({ result }) {
          if (!isAsyncIterable(result)) return void metrics.subscribed(name, true);
          return { onEnd: metrics.subscribed(name, false) };
        },
      };
    },
  };
}
