import type { IncomingMessage, Server } from 'node:http';
import { GraphQLError, getOperationAST, type ExecutionResult, type FormattedExecutionResult } from 'graphql';
import { CloseCode, handleProtocols, makeServer } from 'graphql-ws';
import { WebSocketServer, type WebSocket } from 'ws';
import type { EventsConfig, WebSocketConfig } from '../config.ts';
import { DATABASE_UNAVAILABLE, isDatabaseUnavailable } from '../domain/core/stores/prisma-errors.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import type { InFlightCounter } from './in-flight.ts';
import type { GraphQLServer } from './server.ts';
import { rateLimitedError, type RateLimiter } from '../limits/rate-limit.ts';
import type { EventBus } from '../domain/core/bus.ts';
import { within } from '../domain/core/within.ts';

export interface WebSocketOptions {
  bus: EventBus;
  events: Pick<EventsConfig, 'slowClientMs' | 'streamBufferBytes'>;
  limits: WebSocketConfig;
  /** Every operation counts against its caller's rate limit, as a request over HTTP does. */
  rateLimiter: RateLimiter;
  /** Queries and mutations each key has under way, counted here from the moment they arrive. */
  inFlight: InFlightCounter;
  /** The caller behind the key in `connectionParams`, or why there is none. */
  authenticate(connectionParams: Record<string, unknown> | undefined): Promise<{ viewer: Viewer } | { missing: boolean; reason: string }>;
  log: { debug(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };
}

/** What a socket carries once its `connection_init` is accepted. */
interface Extra {
  socket: WebSocket;
  request: IncomingMessage;
  viewer?: Viewer;
}

/** Close codes: 1009 is ws's own for oversized messages; the rest follow graphql-ws's meanings. */
const TRY_AGAIN_LATER = 1013;
const KEY_DELETED = 4403;
const TOO_MANY_SOCKETS = 4429;
/** How long a closing socket may take to hand its last bytes to a client that does not read. */
const LINGER_MS = 10_000;
/** On shutdown, how long subscriptions may take to send their last result before sockets close. */
const LAST_RESULTS_MS = 2_000;
/** Sockets are pinged this often; one that does not answer by the next ping is gone. */
const KEEP_ALIVE_MS = 12_000;

/**
 * Errors may carry `extensions.http` (a status and headers) for Yoga to answer an HTTP request
 * with; a socket has no response to set them on, so they are not sent there.
 */
function withoutHttpExtensions(result: ExecutionResult): FormattedExecutionResult | void {
  if (!result.errors?.some((e) => e.extensions?.http)) return;
  return {
    ...result,
    errors: result.errors.map((e) => {
      const { http: _http, ...extensions } = e.extensions;
      return { ...e.toJSON(), extensions };
    }),
  };
}

/**
 * graphql-ws on the same port and path as GraphQL over HTTP. A socket must present a valid API
 * key in `connection_init` or it is closed; each operation then runs through the Yoga envelope as
 * that caller, so the same limits and error masking apply as over HTTP. One socket can hold at
 * most so many operations and buffered bytes, and one key so many sockets: a hostile or broken
 * client costs the server a bounded amount. This is graphql-ws's own server core with a socket
 * adapter of ours, so that sends to closed sockets are dropped quietly and every failure goes
 * through the service's logger.
 */
export function attachGraphQLWebSocket(server: Server, yoga: GraphQLServer, path: string, options: WebSocketOptions) {
  const { limits, log } = options;
  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.maxMessageBytes, handleProtocols });
  const socketsOfKey = new Map<string, Set<WebSocket>>();
  const keyOf = new WeakMap<WebSocket, string>();
  // Queries and mutations under way per socket: a socket whose key is deleted closes once they
  // have answered, so deleting the key in use over the socket still gets its result.
  const answering = new WeakMap<WebSocket, Set<string>>();
  const revoked = new WeakSet<WebSocket>();
  // Subscriptions under way per open socket, so that on shutdown each can send its last result
  // (SHUTTING_DOWN) before the socket closes.
  const subscriptions = new Map<WebSocket, Set<string>>();
  let allEnded: (() => void) | null = null;
  const subscriptionsEnded = (ws: WebSocket, id?: string) => {
    const ids = subscriptions.get(ws);
    if (id === undefined || (ids?.delete(id) && ids.size === 0)) subscriptions.delete(ws);
    if (subscriptions.size === 0) allEnded?.();
  };
  let droppedAsSlow = 0;

  server.on('upgrade', (request, socket, head) => {
    if (new URL(request.url ?? '/', 'http://localhost').pathname !== path) {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request));
  });

  const closeRevoked = (ws: WebSocket) => ws.close(KEY_DELETED, 'The API key of this connection was deleted');
  /** Operations of each socket holding a place in their key's count of operations under way. */
  const counted = new WeakMap<WebSocket, Set<string>>();
  const uncount = (ws: WebSocket, id?: string) => {
    const ids = counted.get(ws);
    const keyId = keyOf.get(ws);
    if (!ids || !keyId) return;
    for (const one of id === undefined ? [...ids] : [id]) if (ids.delete(one)) options.inFlight.give(keyId);
  };

  const answered = (ws: WebSocket, id: string) => {
    uncount(ws, id);
    const ids = answering.get(ws);
    if (!ids?.delete(id)) return;
    if (ws.isPaused && ids.size < limits.maxOperations) ws.resume();
    if (ids.size > 0 || !revoked.has(ws)) return;
    // After the operation's last message has been queued on the socket.
    setImmediate(() => closeRevoked(ws));
  };

  /** Closes a socket whose client does not read; the close frame waits behind what is unread. */
  const dropSlow = (ws: WebSocket) => {
    if (ws.readyState !== ws.OPEN) return;
    droppedAsSlow++;
    ws.close(TRY_AGAIN_LATER, 'Slow consumer: messages went unread; reconnect and resume subscriptions with after');
    setTimeout(() => ws.terminate(), LINGER_MS).unref();
  };

  type Run = (args: unknown) => Promise<ExecutionResult | AsyncIterable<ExecutionResult>>;
  const graphqlWs = makeServer<Record<string, unknown> | undefined, Extra>({
    execute: (args) => (args.rootValue as { execute: Run }).execute(args),
    subscribe: (args) => (args.rootValue as { subscribe: Run }).subscribe(args),
    onConnect: async (ctx) => {
      const socket = ctx.extra.socket;
      let auth;
      try {
        auth = await options.authenticate(ctx.connectionParams);
      } catch (e) {
        if (!isDatabaseUnavailable(e)) throw e;
        socket.close(TRY_AGAIN_LATER, DATABASE_UNAVAILABLE);
        return false;
      }
      if (!('viewer' in auth)) {
        socket.close(auth.missing ? CloseCode.Unauthorized : CloseCode.Forbidden, auth.reason);
        return false;
      }
      const keyId = auth.viewer.keyId!;
      const sockets = socketsOfKey.get(keyId) ?? new Set();
      if (sockets.size >= limits.maxSocketsPerKey) {
        socket.close(TOO_MANY_SOCKETS, `Too many open connections for this API key (at most ${limits.maxSocketsPerKey})`);
        return false;
      }
      socketsOfKey.set(keyId, sockets.add(socket));
      keyOf.set(socket, keyId);
      ctx.extra.viewer = auth.viewer;
      return true;
    },
    onNext: (_ctx, _id, _payload, _args, result) => withoutHttpExtensions(result),
    onComplete: (ctx, id) => {
      answered(ctx.extra.socket, id);
      subscriptionsEnded(ctx.extra.socket, id);
    },
    onError: (ctx, id) => answered(ctx.extra.socket, id),
    onSubscribe: async (ctx, id, params) => {
      const socket = ctx.extra.socket;
      // graphql-ws registers the operation before asking: the count includes this one.
      if (Object.keys(ctx.subscriptions).length > limits.maxOperations) {
        return [
          new GraphQLError(`Too many operations in flight on this connection (at most ${limits.maxOperations})`, {
            extensions: { code: 'TOO_MANY_OPERATIONS' },
          }),
        ];
      }
      // Counted from now, before anything is awaited: a flood of operations on one key is refused
      // here, cheaply, instead of piling up behind the first ones.
      if (!options.inFlight.take(keyOf.get(socket)!)) return [options.inFlight.error(false)];
      (counted.get(socket) ?? counted.set(socket, new Set()).get(socket)!).add(id);
      const refuse = (errors: readonly GraphQLError[]) => {
        uncount(socket, id);
        return errors;
      };
      const rate = await options.rateLimiter.check(ctx.extra.viewer!, ctx.extra.request.socket.remoteAddress ?? '');
      if (rate && !rate.allowed) {
        const { message, extensions } = rateLimitedError(rate, true);
        return refuse([new GraphQLError(message, { extensions })]);
      }
      const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
        req: ctx.extra.request,
        socket,
        params,
        viewer: ctx.extra.viewer,
        countedBySocket: true,
      });
      // A syntax error, or a limit the envelope enforces by throwing (tokens, depth): an error
      // for this operation, and the socket goes on.
      let document;
      let errors;
      try {
        document = parse(params.query);
        errors = validate(schema, document);
      } catch (e) {
        uncount(socket, id);
        if (e instanceof GraphQLError) return [e];
        throw e;
      }
      if (errors.length) return refuse(errors);
      if (getOperationAST(document, params.operationName)?.operation === 'subscription') {
        // Subscriptions last: MAX_SUBSCRIPTIONS_PER_KEY bounds them, not this count.
        uncount(socket, id);
        subscriptions.set(socket, (subscriptions.get(socket) ?? new Set()).add(id));
      } else {
        const ids = answering.get(socket) ?? new Set();
        answering.set(socket, ids.add(id));
        // A client with this many queries unanswered is not read until one is answered: one that
        // floods operations without reading the results stalls itself, not the server.
        if (ids.size >= limits.maxOperations) socket.pause();
      }
      return {
        schema,
        operationName: params.operationName,
        document,
        variableValues: params.variables,
        contextValue: await contextFactory(),
        rootValue: { execute, subscribe },
      };
    },
  });

  wss.on('connection', (socket: WebSocket, request: IncomingMessage) => {
    // Oversized messages (ws closes with 1009) and protocol violations end up here.
    socket.on('error', (err) => log.debug({ err }, 'websocket closed on a client error'));
    let alive = true;
    socket.on('pong', () => (alive = true));
    const keepAlive = setInterval(() => {
      if (!alive) return void socket.terminate();
      alive = false;
      socket.ping();
    }, KEEP_ALIVE_MS);
    const closed = graphqlWs.opened(
      {
        protocol: socket.protocol,
        send: (data) =>
          new Promise<void>((resolve) => {
            // Results for a socket that has gone are dropped.
            if (socket.readyState !== socket.OPEN) return resolve();
            if (socket.bufferedAmount > options.events.streamBufferBytes) {
              dropSlow(socket);
              return resolve();
            }
            socket.send(data, () => resolve());
          }),
        close: (code, reason) => socket.close(code, reason),
        onMessage: (handle) =>
          socket.on('message', async (data) => {
            try {
              await handle(String(data));
            } catch (err) {
              log.error({ err }, 'a graphql-ws message could not be handled');
              socket.close(CloseCode.InternalServerError, 'Internal server error');
            }
          }),
      },
      { socket, request },
    );
    socket.once('close', (code, reason) => {
      clearInterval(keepAlive);
      subscriptionsEnded(socket);
      uncount(socket);
      const keyId = keyOf.get(socket);
      if (keyId) socketsOfKey.get(keyId)?.delete(socket);
      if (keyId && socketsOfKey.get(keyId)?.size === 0) socketsOfKey.delete(keyId);
      void closed(code, String(reason)).catch((err) => log.error({ err }, 'a graphql-ws socket did not close cleanly'));
    });
  });

  // A deleted key closes every socket opened with it.
  const stopRevocations = options.bus.onKeyRevoked((keyId) => {
    for (const ws of socketsOfKey.get(keyId) ?? []) {
      revoked.add(ws);
      if (!answering.get(ws)?.size) closeRevoked(ws);
    }
  });

  // A subscription whose sends stall (the client stopped reading) holds only what is in flight,
  // but its socket is dropped once its output has not drained for `slowClientMs` per
  // `streamBufferBytes` waiting (as an SSE stream's is: one long message is no stopped reader).
  const stuckSince = new WeakMap<WebSocket, number>();
  const { slowClientMs, streamBufferBytes } = options.events;
  const monitor = setInterval(
    () => {
      const now = Date.now();
      for (const ws of wss.clients) {
        if (ws.bufferedAmount === 0) {
          stuckSince.delete(ws);
          continue;
        }
        const since = stuckSince.get(ws) ?? now;
        stuckSince.set(ws, since);
        if (now - since >= slowClientMs * Math.max(1, ws.bufferedAmount / streamBufferBytes)) dropSlow(ws);
      }
    },
    Math.max(50, Math.min(1000, slowClientMs / 4)),
  );
  monitor.unref();

  return {
    /** For metrics and tests: sockets open now, and how many were dropped as too slow. */
    stats: () => ({ open: wss.clients.size, droppedAsSlow }),
    /** Call once the bus has ended every subscription: their last results go out before the sockets close. */
    async close() {
      clearInterval(monitor);
      stopRevocations();
      if (subscriptions.size > 0) await within(new Promise<void>((resolve) => (allEnded = resolve)), LAST_RESULTS_MS, undefined);
      for (const ws of wss.clients) ws.close(1001, 'The server is going away; reconnect');
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
