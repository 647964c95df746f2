import { createServer, type AddressInfo, type Server } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** Listening sockets per port where the runtime can open several (see `listen`). */
export const LISTENING_SOCKETS = 16;

/**
 * Whether Node can open several listening sockets on one port (`reusePort`: Node 22.12 and 23.1
 * on, on Linux).
 */
export function canSharePort(version = process.versions.node, platform = process.platform): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return platform === 'linux' && (major > 22 || (major === 22 && minor >= 12));
}

function listening(server: Server, options: { port: number; host: string; reusePort?: boolean }) {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/**
 * Starts the service listening and returns its address. libuv accepts one connection per
 * listening socket per turn of the event loop, and under load a turn takes milliseconds: a
 * burst of new clients then waits in the kernel's queue before the service even sees it
 * (bench/README.md, issue 23's sixth pass). Where the runtime can, the service listens with
 * LISTENING_SOCKETS sockets on the port (`SO_REUSEPORT`), so a turn takes in that many. All of
 * them hand their connections to the one HTTP server; each stops accepting when it does, and the
 * service closes only once their connections have ended, as the server's own.
 */
export async function listen(http: FastifyInstance, options: { port: number; host: string }): Promise<string> {
  if (!canSharePort()) return http.listen(options);
  // With `SO_REUSEPORT` on, a second service started on a taken port would share it silently
  // instead of failing: the port is tried alone first, so that it fails as it would without.
  if (options.port !== 0) {
    const probe = createServer();
    await listening(probe, { ...options });
    await new Promise((resolve) => probe.close(resolve));
  }
  const more = Array.from({ length: LISTENING_SOCKETS - 1 }, () => createServer((socket) => http.server.emit('connection', socket)));
  let closed: Promise<unknown> = Promise.resolve();
  // Registered after the application's own hooks, so they run last: the sockets stop accepting
  // when the server does (right after the last `preClose`), and the database closes (an
  // `onClose` registered before these, so run after them) once their connections have ended.
  http.addHook('preClose', async () => {
    closed = Promise.all(more.map((s) => new Promise((resolve) => (s.listening ? s.close(resolve) : resolve(undefined)))));
  });
  http.addHook('onClose', async () => {
    await closed;
  });
  // Fastify hands its listen options to Node's `server.listen` as they are.
  const url = await http.listen({ ...options, reusePort: true } as typeof options);
  const { address, port } = http.server.address() as AddressInfo;
  try {
    for (const server of more) await listening(server, { port, host: address, reusePort: true });
  } catch (e) {
    await http.close();
    throw e;
  }
  return url;
}
