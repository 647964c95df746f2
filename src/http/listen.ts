import { fork } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** Handles on the listening socket; each takes in one new connection per turn of the event loop. */
export const LISTENING_HANDLES = 16;

/** Whatever happened to the helper, it is given this long to hand the copies back. */
const HELPER_WAIT_MS = 10_000;

/** A listening socket's own handle, as Node's `server.listen(handle)` takes it. */
interface SocketHandle {
  close(): void;
}

/**
 * `count` more handles on a server's listening socket, each with a file descriptor of its own,
 * given to `adopt` as they come. Node passes a handle to another process as a new descriptor,
 * so a short-lived helper is sent the server's handle and sends it back, `count` times. The
 * handle itself is sent, not the server: a server sent to a process listens there, and the
 * helper would take in connections (and the bytes of their requests) that it cannot hand on.
 * The handle is `_handle`, as Node's cluster module passes it.
 */
async function copiesOf(server: Server, count: number, adopt: (handle: SocketHandle) => void): Promise<void> {
  const handle = (server as unknown as { _handle: SocketHandle | null })._handle;
  if (!handle || count === 0) return;
  // No environment and no flags: the helper loads nothing it does not need (a preload from
  // NODE_OPTIONS, or an inspector on the service's port).
  const helper = fork(new URL('./listener-copies.js', import.meta.url), [], {
    execArgv: [],
    env: {},
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  let settled = false;
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      let received = 0;
      timer = setTimeout(() => reject(new Error(`no answer within ${HELPER_WAIT_MS} ms`)), HELPER_WAIT_MS);
      helper.on('message', (_message, copy) => {
        // One that comes after giving up is not kept.
        if (settled) return (copy as SocketHandle | undefined)?.close();
        if (copy) adopt(copy as SocketHandle);
        if (++received === count) resolve();
      });
      helper.once('error', reject);
      // 'close' rather than 'exit': it comes once every message the helper sent has been read,
      // so copies it sent just before it ended are kept.
      helper.once('close', (code) => reject(new Error(`the helper exited with ${code}`)));
      // Node's types name servers and sockets; their handles are sent the same way. A send fails
      // (EINVAL) when the server closed meanwhile: that ends the copying, as an error would.
      for (let i = 0; i < count; i++) helper.send('copy', handle as unknown as Server, (err) => err && reject(err));
    });
  } finally {
    settled = true;
    clearTimeout(timer);
    // Its copies keep the port open until it is gone: a service closed during start-up must not
    // leave it held. (One that never started has no pid, and no exit to wait for.)
    if (helper.pid !== undefined && helper.exitCode === null && helper.signalCode === null) {
      const gone = once(helper, 'exit').catch(() => {});
      helper.kill();
      await gone;
    }
  }
}

/**
 * Starts the service listening and returns its address. libuv accepts one connection per
 * listening handle per turn of the event loop, and under load a turn takes milliseconds: a
 * burst of new clients waited in the kernel's queue before the service even saw them (issue 23's
 * sixth pass in bench/README.md). So the service holds LISTENING_HANDLES handles on its one
 * listening socket, and a turn takes in that many. They hand their connections to the one HTTP
 * server, stop accepting when it does, and the service closes only once their connections have
 * ended, as the server's own. Should the copies fail, the service listens with those it has.
 */
export async function listen(
  http: FastifyInstance,
  options: { port: number; host: string },
  log: { warn(obj: unknown, msg?: string): void } = http.log,
): Promise<string> {
  const copies = new Set<Server>();
  let closing = false;
  let closed: Promise<unknown> = Promise.resolve();
  // Registered after the application's own hooks, so they run last: the copies stop accepting
  // when the server does (right after the last `preClose`), and the database closes (an
  // `onClose` registered before these, so run after them) once their connections have ended.
  http.addHook('preClose', async () => {
    closing = true;
    closed = Promise.all([...copies].map((copy) => new Promise((resolve) => copy.close(resolve))));
  });
  http.addHook('onClose', async () => {
    await closed;
  });
  const url = await http.listen(options);
  const take = (socket: Socket) => http.server.emit('connection', socket);
  const adopt = (handle: SocketHandle) => {
    // Closing began while the copies were being made: this one must not accept.
    if (closing) return handle.close();
    // As Node's HTTP server takes its own connections: no Nagle delay for small writes (a token
    // is one), and a client's half-closed connection still gets its answer.
    const copy = createServer({ allowHalfOpen: true, noDelay: true }, take);
    copy.on('error', (err) => log.warn({ err }, 'a listening handle could not take in a connection'));
    copies.add(copy.listen(handle));
  };
  try {
    await copiesOf(http.server, LISTENING_HANDLES - 1, adopt);
  } catch (err) {
    // Closed during start-up: no handle is wanted any more.
    if (!closing) log.warn({ err, handles: copies.size + 1 }, 'listening with fewer handles: no more could be made');
  }
  return url;
}
