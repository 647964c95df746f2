import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { createClient, type Client, type ExecutionResult } from 'graphql-ws';
import WebSocket from 'ws';

export type WsResult<T> = ExecutionResult<T, Record<string, unknown>> & {
  errors?: readonly {
    message: string;
    path?: readonly (string | number)[];
    extensions?: { code?: string; field?: string; [k: string]: unknown };
  }[];
};

/**
 * graphql-ws clients for one test file: the real `createClient` over the `ws` package, on the
 * same /graphql path as HTTP, with the API key in `connectionParams`. `disposeAll` closes them.
 */
export function graphqlWsClients(baseUrl: () => string) {
  const clients: Client[] = [];
  return {
    connect(
      apiKey?: string | null,
      options: { paramName?: string; onOpened?: (socket: unknown) => void; lazyCloseTimeout?: number } = {},
    ): Client {
      const client = createClient({
        url: `${baseUrl().replace('http', 'ws')}/graphql`,
        webSocketImpl: WebSocket,
        connectionParams: apiKey == null ? {} : { [options.paramName ?? 'X-Api-Key']: apiKey },
        retryAttempts: 0,
        lazy: true,
        lazyCloseTimeout: options.lazyCloseTimeout,
        on: options.onOpened ? { opened: options.onOpened } : undefined,
      });
      clients.push(client);
      return client;
    },
    async disposeAll() {
      await Promise.all(clients.splice(0).map((c) => c.dispose()));
    },
  };
}

/**
 * Runs one query or mutation over the socket: resolves with its single result; rejects on a
 * protocol-level error (the server refused the operation or the socket closed).
 */
export function wsExecute<TResult, TVariables>(
  client: Client,
  document: TypedDocumentNode<TResult, TVariables>,
  variables?: TVariables,
): Promise<WsResult<TResult>> {
  return new Promise((resolve, reject) => {
    const results: WsResult<TResult>[] = [];
    client.subscribe<TResult>(
      { query: print(document), variables: variables as Record<string, unknown> | undefined },
      {
        next: (result) => results.push(result as WsResult<TResult>),
        error: reject,
        complete: () => (results.length === 1 ? resolve(results[0]!) : reject(new Error(`expected one result, got ${results.length}`))),
      },
    );
  });
}

export interface LiveSubscription<T> {
  /** Results received so far. */
  results: WsResult<T>[];
  /** Resolves with the first result matching `predicate` (rejects if the subscription ends first). */
  waitFor(predicate: (r: WsResult<T>) => boolean): Promise<WsResult<T>>;
  /** Resolves when the server completes it, or rejects with the protocol error / close event. */
  ended: Promise<WsResult<T>[]>;
  unsubscribe(): void;
}

/** A subscription over the socket, collecting what the server sends. */
export function wsSubscribe<TResult, TVariables>(
  client: Client,
  document: TypedDocumentNode<TResult, TVariables>,
  variables?: TVariables,
): LiveSubscription<TResult> {
  const results: WsResult<TResult>[] = [];
  const waiters = new Set<{
    predicate: (r: WsResult<TResult>) => boolean;
    resolve: (r: WsResult<TResult>) => void;
    reject: (e: unknown) => void;
  }>();
  let settled = false;
  let failure: unknown;
  let unsubscribe = () => {};
  const ended = new Promise<WsResult<TResult>[]>((resolve, reject) => {
    const finish = (error?: unknown) => {
      settled = true;
      failure = error;
      for (const w of waiters)
        w.reject(error ?? new Error(`subscription completed after ${results.length} results without the one awaited`));
      waiters.clear();
      if (error) reject(error);
      else resolve(results);
    };
    unsubscribe = client.subscribe<TResult>(
      { query: print(document), variables: variables as Record<string, unknown> | undefined },
      {
        next: (result) => {
          results.push(result as WsResult<TResult>);
          for (const w of [...waiters]) {
            if (w.predicate(result as WsResult<TResult>)) {
              waiters.delete(w);
              w.resolve(result as WsResult<TResult>);
            }
          }
        },
        error: (e) => finish(e),
        complete: () => finish(),
      },
    );
  });
  ended.catch(() => {});
  return {
    results,
    waitFor(predicate) {
      const found = results.find(predicate);
      if (found) return Promise.resolve(found);
      if (settled) return Promise.reject(failure ?? new Error('subscription already ended'));
      return new Promise((resolve, reject) => waiters.add({ predicate, resolve, reject }));
    },
    ended,
    unsubscribe: () => unsubscribe(),
  };
}
