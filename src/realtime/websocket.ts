import type { Server } from 'node:http';
import type { ExecutionResult } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer } from 'ws';
import type { GraphQLServer } from '../graphql/server.ts';

/**
 * graphql-ws on the same port and path as GraphQL over HTTP. Each operation runs through the
 * Yoga envelope, so the same context (API key from `connectionParams`), limits and error
 * masking apply as over HTTP.
 */
export function attachGraphQLWebSocket(server: Server, yoga: GraphQLServer, path: string) {
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (request, socket, head) => {
    if (new URL(request.url ?? '/', 'http://localhost').pathname !== path) {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request));
  });

  type Run = (args: unknown) => Promise<ExecutionResult | AsyncIterable<ExecutionResult>>;
  type RootValue = { execute: Run; subscribe: Run };
  const disposable = useServer(
    {
      execute: (args) => (args.rootValue as RootValue).execute(args),
      subscribe: (args) => (args.rootValue as RootValue).subscribe(args),
      onSubscribe: async (ctx, _id, params) => {
        const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
          ...ctx,
          req: ctx.extra.request,
          socket: ctx.extra.socket,
          params,
        });
        const args = {
          schema,
          operationName: params.operationName,
          document: parse(params.query),
          variableValues: params.variables,
          contextValue: await contextFactory(),
          rootValue: { execute, subscribe },
        };
        const errors = validate(args.schema, args.document);
        return errors.length ? errors : args;
      },
    },
    wss,
  );

  return {
    async close() {
      await disposable.dispose();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
