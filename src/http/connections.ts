import type { Server, ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import type { HttpConfig } from '../config.ts';

/**
 * Node's own limits on how a request arrives, for `http.createServer`: the whole request,
 * headers and body, within `requestTimeoutMs` (Node answers 408 and closes the socket), an
 * idle keep-alive connection closed after `keepAliveTimeoutMs`. They end once the request has
 * arrived, so responses that stay open (SSE streams) and upgraded WebSockets are not cut.
 * Node looks for late requests every `connectionsCheckingInterval` (30 s by default, which
 * would double the timeout): here a tenth of it, at most a second.
 */
export function requestLimits(config: Pick<HttpConfig, 'requestTimeoutMs' | 'keepAliveTimeoutMs'>): ServerOptions {
  return {
    requestTimeout: config.requestTimeoutMs,
    headersTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.min(1_000, Math.max(50, Math.floor(config.requestTimeoutMs / 10))),
  };
}

export interface ConnectionOptions {
  /** Open connections past which new ones are closed as soon as they are accepted. */
  maxConnections: number;
  log: { warn(obj: unknown, msg?: string): void };
}

/** While connections are being refused, one warning per this interval says how many were. */
const DROP_REPORT_MS = 10_000;

/**
 * The server's open connections, and which are in the middle of a request. On shutdown, the
 * ones without a request (idle keep-alive, or opened and never used) are closed at once, so
 * the process does not wait out their timeouts; those with a request finish it first.
 * Past `maxConnections` open ones (WebSockets count), new connections are closed on accept:
 * refusing some clients beats running out of file descriptors and answering none.
 */
export function trackConnections(server: Server, options: ConnectionOptions) {
  const busy = new Map<Socket, number>();
  let dropped = 0;
  // Counted here rather than with Node's `maxConnections`, which sees only the connections of the
  // listening socket it is set on, and the service may listen with several (`listen.ts`).
  server.on('connection', (socket) => {
    if (busy.size >= options.maxConnections) {
      socket.destroy();
      if (dropped++ > 0) return;
      setTimeout(() => {
        options.log.warn({ dropped, maxConnections: options.maxConnections }, 'connection limit reached: new connections were refused');
        dropped = 0;
      }, DROP_REPORT_MS).unref();
      return;
    }
    busy.set(socket, 0);
    socket.once('close', () => busy.delete(socket));
  });
  server.on('request', (request, response) => {
    const socket = request.socket;
    busy.set(socket, (busy.get(socket) ?? 0) + 1);
    response.once('close', () => {
      const left = (busy.get(socket) ?? 1) - 1;
      if (!busy.has(socket)) return;
      busy.set(socket, left);
      if (left === 0 && closing) socket.destroy();
    });
  });
  let closing = false;
  return {
    /** Closes idle connections now, and each busy one as soon as its request is answered. */
    closeIdle() {
      closing = true;
      for (const [socket, requests] of busy) if (requests === 0) socket.destroy();
    },
    get closing() {
      return closing;
    },
  };
}
