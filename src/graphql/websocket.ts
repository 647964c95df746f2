import type { IncomingMessage, Server } from 'node:http';
import { type ExecutionArgs, type ExecutionResult, type FormattedExecutionResult, GraphQLError, getOperationAST } from 'graphql';
import {
  CloseCode,
  type Context,
  type WebSocket as GraphQLWsSocket,
  handleProtocols,
  makeServer,
  type ServerOptions,
  type SubscribePayload,
} from 'graphql-ws';
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

/** Close codes: 1009 is ws's own for oversized messages; the rest follow graphql-ws's meanings. */
const TRY_AGAIN_LATER = 1013;
const KEY_DELETED = 4403;
const TOO_MANY_SOCKETS = 4429;
/**
 * How long a closing socket may go without its client taking any of its last bytes; one that
 * reads on, however slowly, gets to the close frame behind them.
 */
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
 * One open socket and what the server keeps for it. graphql-ws hands it to every hook as the
 * connection's `extra`, so each hook finds the socket's key and operations here.
 */
class SocketState {
  /** The caller, and the key it connected with, once its `connection_init` is accepted. */
  viewer?: Viewer;
  keyId: string | null = null;
  /** Operations holding a place in their key's count of operations under way. */
  private readonly counted = new Set<string>();
  /**
   * Queries and mutations under way: a socket whose key is deleted closes once they have
   * answered, so deleting the key in use over the socket still gets its result.
   */
  private readonly answering = new Set<string>();
  private revoked = false;
  /** Subscriptions under way, so that on shutdown each can send its last result (SHUTTING_DOWN) before the socket closes. */
  readonly subscriptions = new Set<string>();
  /** Since when the socket's output has waited undrained (see `SlowConsumers`); null while it drains. */
  stuckSince: number | null = null;

  constructor(
    readonly socket: WebSocket,
    readonly request: IncomingMessage,
    private readonly inFlight: InFlightCounter,
    private readonly maxOperations: number,
  ) {}

  /** Takes a place for operation `id` in its key's count; false when the key has none left. */
  count(id: string): boolean {
    if (!this.inFlight.take(this.keyId!)) return false;
    this.counted.add(id);
    return true;
  }

  /** Gives back the place of operation `id`, or of every operation when the socket closes. */
  uncount(id?: string) {
    if (!this.keyId) return;
    for (const one of id === undefined ? [...this.counted] : [id]) if (this.counted.delete(one)) this.inFlight.give(this.keyId);
  }

  /**
   * A query or mutation starts. A client with this many unanswered is not read until one is
   * answered: one that floods operations without reading the results stalls itself, not the server.
   */
  started(id: string) {
    this.answering.add(id);
    if (this.answering.size >= this.maxOperations) this.socket.pause();
  }

  /** Operation `id` has sent its last message (completed or failed). */
  answered(id: string) {
    this.uncount(id);
    if (!this.answering.delete(id)) return;
    if (this.socket.isPaused && this.answering.size < this.maxOperations) this.socket.resume();
    if (this.answering.size > 0 || !this.revoked) return;
    // After the operation's last message has been queued on the socket.
    setImmediate(() => this.closeRevoked());
  }

  /** The socket's key was deleted: it closes once what it has under way has answered. */
  revoke() {
    this.revoked = true;
    if (this.answering.size === 0) this.closeRevoked();
  }

  private closeRevoked() {
    this.socket.close(KEY_DELETED, 'The API key of this connection was deleted');
  }
}

/** The open sockets, each key's among them (a key may hold so many), and the subscriptions under way on all of them. */
class OpenSockets {
  /** Every open socket, authenticated or not yet (the slow-consumer monitor watches them all). */
  readonly all = new Set<SocketState>();
  private readonly ofKey = new Map<string, Set<SocketState>>();
  private subscriptionCount = 0;
  private allEnded: (() => void) | null = null;

  constructor(private readonly maxSocketsPerKey: number) {}

  opened(state: SocketState) {
    this.all.add(state);
  }

  /** Binds an authenticated socket to its key, unless the key already holds as many sockets as it may. */
  admit(state: SocketState, viewer: Viewer): boolean {
    const keyId = viewer.keyId!;
    const sockets = this.ofKey.get(keyId) ?? new Set();
    if (sockets.size >= this.maxSocketsPerKey) return false;
    this.ofKey.set(keyId, sockets.add(state));
    state.keyId = keyId;
    state.viewer = viewer;
    return true;
  }

  /** A deleted key closes every socket opened with it. */
  revoke(keyId: string) {
    for (const state of this.ofKey.get(keyId) ?? []) state.revoke();
  }

  subscribed(state: SocketState, id: string) {
    const before = state.subscriptions.size;
    if (state.subscriptions.add(id).size > before) this.subscriptionCount++;
  }

  /** Subscription `id` of a socket ended, or every one of them when the socket closes. */
  subscriptionEnded(state: SocketState, id?: string) {
    if (id === undefined) {
      this.subscriptionCount -= state.subscriptions.size;
      state.subscriptions.clear();
    } else if (state.subscriptions.delete(id)) this.subscriptionCount--;
    if (this.subscriptionCount === 0) this.allEnded?.();
  }

  /** Forgets a closed socket, giving back what it held. */
  closed(state: SocketState) {
    this.all.delete(state);
    this.subscriptionEnded(state);
    state.uncount();
    const sockets = state.keyId ? this.ofKey.get(state.keyId) : undefined;
    sockets?.delete(state);
    if (sockets?.size === 0) this.ofKey.delete(state.keyId!);
  }

  /** Settles once every subscription has ended (each has sent its last result), or after `ms`. */
  async subscriptionsEnded(ms: number) {
    if (this.subscriptionCount > 0) await within(new Promise<void>((resolve) => (this.allEnded = resolve)), ms, undefined);
  }
}

/**
 * Clients that stopped reading. A send that finds more than `streamBufferBytes` waiting drops the
 * socket at once. Otherwise a subscription whose sends stall holds only what is in flight, but its
 * socket is dropped once its output has not drained for `slowClientMs` per `streamBufferBytes`
 * waiting (as an SSE stream's is: one long message is no stopped reader).
 */
class SlowConsumers {
  dropped = 0;
  private readonly monitor: NodeJS.Timeout;

  constructor(
    private readonly events: WebSocketOptions['events'],
    sockets: Iterable<SocketState>,
  ) {
    this.monitor = setInterval(() => this.check(sockets), Math.max(50, Math.min(1000, events.slowClientMs / 4)));
    this.monitor.unref();
  }

  /** Whether the socket holds more unsent than one more send may add to. */
  full(socket: WebSocket) {
    return socket.bufferedAmount > this.events.streamBufferBytes;
  }

  /** Closes a socket whose client does not read; the close frame waits behind what is unread. */
  drop(socket: WebSocket) {
    if (socket.readyState !== socket.OPEN) return;
    this.dropped++;
    socket.close(TRY_AGAIN_LATER, 'Slow consumer: messages went unread; reconnect and resume subscriptions with after');
    this.lingerWhileRead(socket);
  }

  /**
   * Ends the connection once its client stops taking what is on its way. A fixed linger cut off
   * a client that had resumed reading but, on a busy machine, had not reached the close frame
   * in time: it saw an abnormal closure (1006) instead of the reason. Once nothing is left
   * unsent here, one more period covers what the kernel still holds.
   */
  private lingerWhileRead(socket: WebSocket) {
    let unsent = socket.bufferedAmount;
    const timer = setInterval(() => {
      if (socket.readyState === socket.CLOSED) return clearInterval(timer);
      const now = socket.bufferedAmount;
      if (now < unsent) return void (unsent = now);
      clearInterval(timer);
      socket.terminate();
    }, LINGER_MS);
    timer.unref();
  }

  stop() {
    clearInterval(this.monitor);
  }

  private check(sockets: Iterable<SocketState>) {
    const { slowClientMs, streamBufferBytes } = this.events;
    const now = Date.now();
    for (const state of sockets) {
      const { bufferedAmount } = state.socket;
      if (bufferedAmount === 0) {
        state.stuckSince = null;
        continue;
      }
      state.stuckSince ??= now;
      if (now - state.stuckSince >= slowClientMs * Math.max(1, bufferedAmount / streamBufferBytes)) this.drop(state.socket);
    }
  }
}

type ConnectionParams = Record<string, unknown> | undefined;
type Run = (args: unknown) => Promise<ExecutionResult | AsyncIterable<ExecutionResult>>;

/**
 * graphql-ws's hooks: who may connect, what an operation must pass before it runs (then it runs
 * through the Yoga envelope as its caller), and what is given back when one ends.
 */
function serverHooks(yoga: GraphQLServer, sockets: OpenSockets, options: WebSocketOptions): ServerOptions<ConnectionParams, SocketState> {
  return {
    execute: (args) => (args.rootValue as { execute: Run }).execute(args),
    subscribe: (args) => (args.rootValue as { subscribe: Run }).subscribe(args),
    onConnect: (ctx) => connect(ctx.extra, ctx.connectionParams, sockets, options),
    onSubscribe: (ctx, id, params) => startOperation(ctx, id, params, yoga, sockets, options),
    onNext: (_ctx, _id, _payload, _args, result) => withoutHttpExtensions(result),
    onComplete: (ctx, id) => {
      ctx.extra.answered(id);
      sockets.subscriptionEnded(ctx.extra, id);
    },
    onError: (ctx, id) => ctx.extra.answered(id),
  };
}

/** `connection_init`: the socket stays open only with a valid API key that has a socket to spare. */
async function connect(state: SocketState, params: ConnectionParams, sockets: OpenSockets, options: WebSocketOptions) {
  const { socket } = state;
  let auth;
  try {
    auth = await options.authenticate(params);
  } catch (e) {
    if (!isDatabaseUnavailable(e)) throw e;
    socket.close(TRY_AGAIN_LATER, DATABASE_UNAVAILABLE);
    return false;
  }
  if (!('viewer' in auth)) {
    socket.close(auth.missing ? CloseCode.Unauthorized : CloseCode.Forbidden, auth.reason);
    return false;
  }
  if (!sockets.admit(state, auth.viewer)) {
    const { maxSocketsPerKey } = options.limits;
    socket.close(TOO_MANY_SOCKETS, `Too many open connections for this API key (at most ${maxSocketsPerKey})`);
    return false;
  }
  return true;
}

/**
 * `subscribe`: an operation is refused with errors of its own (the socket goes on) when its socket
 * or its key has too many under way, its caller is over the rate limit, or its document does not
 * parse or validate; otherwise it is prepared to run through the Yoga envelope as its caller.
 */
async function startOperation(
  ctx: Context<ConnectionParams, SocketState>,
  id: string,
  params: SubscribePayload,
  yoga: GraphQLServer,
  sockets: OpenSockets,
  options: WebSocketOptions,
): Promise<ExecutionArgs | readonly GraphQLError[]> {
  const state = ctx.extra;
  const { maxOperations } = options.limits;
  // graphql-ws registers the operation before asking: the count includes this one.
  if (Object.keys(ctx.subscriptions).length > maxOperations) {
    return [
      new GraphQLError(`Too many operations in flight on this connection (at most ${maxOperations})`, {
        extensions: { code: 'TOO_MANY_OPERATIONS' },
      }),
    ];
  }
  // Counted from now, before anything is awaited: a flood of operations on one key is refused
  // here, cheaply, instead of piling up behind the first ones.
  if (!state.count(id)) return [options.inFlight.error(false)];
  const refuse = (errors: readonly GraphQLError[]) => {
    state.uncount(id);
    return errors;
  };
  const rate = await options.rateLimiter.check(state.viewer!, state.request.socket.remoteAddress ?? '');
  if (rate && !rate.allowed) {
    const { message, extensions } = rateLimitedError(rate, true);
    return refuse([new GraphQLError(message, { extensions })]);
  }
  const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
    req: state.request,
    socket: state.socket,
    params,
    viewer: state.viewer,
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
    state.uncount(id);
    if (e instanceof GraphQLError) return [e];
    throw e;
  }
  if (errors.length) return refuse(errors);
  if (getOperationAST(document, params.operationName)?.operation === 'subscription') {
    // Subscriptions last: MAX_SUBSCRIPTIONS_PER_KEY bounds them, not this count.
    state.uncount(id);
    sockets.subscribed(state, id);
  } else {
    state.started(id);
  }
  return {
    schema,
    operationName: params.operationName,
    document,
    variableValues: params.variables,
    contextValue: await contextFactory(),
    rootValue: { execute, subscribe },
  };
}

/**
 * The socket as graphql-ws sees it: results for a socket that has gone are dropped quietly, a
 * client that does not read is dropped, and a failure goes through the service's logger.
 */
function adapt(socket: WebSocket, slow: SlowConsumers, log: WebSocketOptions['log']): GraphQLWsSocket {
  return {
    protocol: socket.protocol,
    send: (data) =>
      new Promise<void>((resolve) => {
        if (socket.readyState !== socket.OPEN) return resolve();
        if (slow.full(socket)) {
          slow.drop(socket);
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
  };
}

/** Pings the socket; one that has not answered by the next ping is gone. */
function keepAlive(socket: WebSocket): NodeJS.Timeout {
  let alive = true;
  socket.on('pong', () => (alive = true));
  return setInterval(() => {
    if (!alive) return void socket.terminate();
    alive = false;
    socket.ping();
  }, KEEP_ALIVE_MS);
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
  const sockets = new OpenSockets(limits.maxSocketsPerKey);
  const slow = new SlowConsumers(options.events, sockets.all);
  const graphqlWs = makeServer(serverHooks(yoga, sockets, options));

  server.on('upgrade', (request, socket, head) => {
    if (new URL(request.url ?? '/', 'http://localhost').pathname !== path) {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request));
  });

  wss.on('connection', (socket: WebSocket, request: IncomingMessage) => {
    // Oversized messages (ws closes with 1009) and protocol violations end up here.
    socket.on('error', (err) => log.debug({ err }, 'websocket closed on a client error'));
    const pings = keepAlive(socket);
    const state = new SocketState(socket, request, options.inFlight, limits.maxOperations);
    sockets.opened(state);
    const closed = graphqlWs.opened(adapt(socket, slow, log), state);
    socket.once('close', (code, reason) => {
      clearInterval(pings);
      sockets.closed(state);
      void closed(code, String(reason)).catch((err) => log.error({ err }, 'a graphql-ws socket did not close cleanly'));
    });
  });

  const stopRevocations = options.bus.onKeyRevoked((keyId) => sockets.revoke(keyId));

  return {
    /** For metrics and tests: sockets open now, and how many were dropped as too slow. */
    stats: () => ({ open: wss.clients.size, droppedAsSlow: slow.dropped }),
    /** Call once the bus has ended every subscription: their last results go out before the sockets close. */
    async close() {
      slow.stop();
      stopRevocations();
      await sockets.subscriptionsEnded(LAST_RESULTS_MS);
      for (const ws of wss.clients) ws.close(1001, 'The server is going away; reconnect');
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
