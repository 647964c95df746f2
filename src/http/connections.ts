import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * The server's open connections, and which are in the middle of a request. On shutdown, the
 * ones without a request (idle keep-alive, or opened and never used) are closed at once, so
 * the process does not wait out their timeouts; those with a request finish it first.
 */
export function trackConnections(server: Server) {
  const busy = new Map<Socket, number>();
  server.on('connection', (socket) => {
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
