import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { createClient, type Client, type ExecutionResult } from 'graphql-ws';
import WebSocket from 'ws';

export type WsResult<T> = ExecutionResult<T, Record<string, unknown>> & {
  errors?: readonly { message: string; path?: readonly (string | number)[]; extensions?: { code?: string; field?: string; [k: string]: unknown } }[];
};

/**
 * graphql-ws clients for one test file: the real `createClient` over the `ws` package, on the
 * same /graphql path as HTTP, with the API key in `connectionParams`. `disposeAll` closes them.
 */
export function graphqlWsClients(baseUrl: () => string) {
  const clients: Client[] = [];
  return {
    connect(apiKey?: string | null, options: { paramName?: string } = {}): Client {
      const client = createClient({
        url: `${baseUrl().replace('http', 'ws')}/graphql`,
        webSocketImpl: WebSocket,
        connectionParams: apiKey == null ? {} : { [options.paramName ?? 'X-Api-Key']: apiKey },
        retryAttempts: 0,
        lazy: true,
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
export function wsExecute<TResult, TVariables>(client: Client, document: TypedDocumentNode<TResult, TVariables>, variables?: TVariables): Promise<WsResult<TResult>> {
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
