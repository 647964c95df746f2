import type { Server } from 'node:http';
import { getOperationAST, type ExecutionResult } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import type { EventsConfig } from '../config.ts';
import type { GraphQLServer } from '../graphql/server.ts';
import type { EventBus } from './bus.ts';

export interface WebSocketOptions {
  bus: EventBus;
  events: Pick<EventsConfig, 'slowClientMs'>;
  /** The key id of a connection's API key (from `connectionParams`), or null. */
  keyIdOf(connectionParams: Record<string, unknown> | undefined): Promise<string | null>;
}

/** graphql-ws close codes: the client should reconnect (1013), or its key is gone (4403). */
const TRY_AGAIN_LATER = 1013;
const KEY_DELETED = 4403;
const LINGER_MS = 10_000;

/**
 * graphql-ws on the same port and path as GraphQL over HTTP. Each operation runs through the
 * Yoga envelope, so the same context (API key from `connectionParams`), limits and error
 * masking apply as over HTTP.
 */
export function attachGraphQLWebSocket(server: Server, yoga: GraphQLServer, path: string, options: WebSocketOptions) {
  const wss = new WebSocketServer({ noServer: true });
  const keyOf = new WeakMap<WebSocket, string>();
  // Queries and mutations under way per socket: a socket whose key is deleted closes once they
  // have answered, so deleting the key in use over the socket still gets its result.
  const answering = new WeakMap<WebSocket, Set<string>>();
  const revoked = new WeakSet<WebSocket>();
  const closeRevoked = (ws: WebSocket) => ws.close(KEY_DELETED, 'The API key of this connection was deleted');
  const answered = (ws: WebSocket, id: string) => {
    const ids = answering.get(ws);
    if (!ids?.delete(id) || ids.size > 0 || !revoked.has(ws)) return;
    // After the operation's last message has been queued on the socket.
    setImmediate(() => closeRevoked(ws));
  };
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
      onConnect: async (ctx) => {
        const keyId = await options.keyIdOf(ctx.connectionParams);
        if (keyId) keyOf.set(ctx.extra.socket, keyId);
        return true;
      },
      onComplete: (ctx, id) => answered(ctx.extra.socket, id),
      onError: (ctx, id) => answered(ctx.extra.socket, id),
      onSubscribe: async (ctx, id, params) => {
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
        if (errors.length) return errors;
        if (getOperationAST(args.document, params.operationName)?.operation !== 'subscription') {
          const ids = answering.get(ctx.extra.socket) ?? new Set();
          answering.set(ctx.extra.socket, ids.add(id));
        }
        return args;
      },
    },
    wss,
  );

  // A deleted key closes every socket opened with it.
  const stopRevocations = options.bus.onKeyRevoked((keyId) => {
    for (const ws of wss.clients) {
      if (keyOf.get(ws) !== keyId) continue;
      revoked.add(ws);
      if (!answering.get(ws)?.size) closeRevoked(ws);
    }
  });

  // A client that stops reading holds its output in this process; one whose output has not
  // drained for `slowClientMs` is dropped, and resumes its subscriptions with `after`.
  const stuckSince = new WeakMap<WebSocket, number>();
  let droppedAsSlow = 0;
  const monitor = setInterval(() => {
    const now = Date.now();
    for (const ws of wss.clients) {
      if (ws.bufferedAmount === 0) {
        stuckSince.delete(ws);
        continue;
      }
      const since = stuckSince.get(ws) ?? now;
      stuckSince.set(ws, since);
      if (now - since >= options.events.slowClientMs && ws.readyState === ws.OPEN) {
        droppedAsSlow++;
        ws.close(TRY_AGAIN_LATER, 'Slow consumer: messages went unread; reconnect and resume subscriptions with after');
        // The close frame waits behind the unread output; a client that never reads is cut.
        setTimeout(() => ws.terminate(), LINGER_MS).unref();
      }
    }
  }, Math.max(50, Math.min(1000, options.events.slowClientMs / 4)));
  monitor.unref();

  return {
    /** For metrics and tests: sockets open now, and how many were dropped as too slow. */
    stats: () => ({ open: wss.clients.size, droppedAsSlow }),
    async close() {
      clearInterval(monitor);
      stopRevocations();
      await disposable.dispose();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
