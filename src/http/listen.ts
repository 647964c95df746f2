import { fork } from 'node:child_process';
import type { Server, Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** Handles on the listening socket; each takes in one new connection per turn of the event loop. */
export const LISTENING_HANDLES = 16;

/** Whatever happened to the helper, it is given this long to hand the copies back. */
const HELPER_WAIT_MS = 10_000;

/**
 * `count` more handles on a listening socket, each with a file descriptor of its own. Node
 * passes a socket to another process as a new descriptor, so a short-lived helper is sent the
 * server and sends it back, `count` times. A connection a copy takes in while the helper holds
 * it comes back to `take`.
 */
async function copiesOf(server: Server, count: number, take: (socket: Socket) => void): Promise<Server[]> {
  if (count === 0) return [];
  const helper = fork(new URL('./listener-copies.js', import.meta.url), [], {
    execArgv: [],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const copies: Server[] = [];
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${HELPER_WAIT_MS} ms`)), HELPER_WAIT_MS);
      helper.on('message', (message, handle) => {
        if (message === 'connection') return take(handle as Socket);
        // A copy arrives listening: it hands on what it takes in from the start.
        const copy = (handle as Server).on('connection', take);
        copies.push(copy);
        // The helper closes its own copies and leaves once it has handed back all it took in.
        if (copies.length === count) helper.send('done');
      });
      helper.once('error', reject);
      helper.once('exit', (code) => (copies.length === count ? resolve() : reject(new Error(`the helper exited with ${code}`))));
      for (let i = 0; i < count; i++) helper.send('copy', server);
    });
    return copies;
  } catch (e) {
    helper.kill();
    for (const copy of copies) copy.close();
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Starts the service listening and returns its address. libuv accepts one connection per
 * listening handle per turn of the event loop, and under load a turn takes milliseconds: a
 * burst of new clients waited in the kernel's queue before the service even saw them (issue 23's
 * sixth pass in bench/README.md). So the service holds LISTENING_HANDLES handles on its one
 * listening socket, and a turn takes in that many. They hand their connections to the one HTTP
 * server, stop accepting when it does, and the service closes only once their connections have
 * ended, as the server's own. Should the copies fail, the service listens with one handle.
 */
export async function listen(
  http: FastifyInstance,
  options: { port: number; host: string },
  log: { warn(obj: unknown, msg?: string): void } = http.log,
): Promise<string> {
  let copies: Server[] = [];
  let closed: Promise<unknown> = Promise.resolve();
  // Registered after the application's own hooks, so they run last: the copies stop accepting
  // when the server does (right after the last `preClose`), and the database closes (an
  // `onClose` registered before these, so run after them) once their connections have ended.
  http.addHook('preClose', async () => {
    closed = Promise.all(copies.map((s) => new Promise((resolve) => (s.listening ? s.close(resolve) : resolve(undefined)))));
  });
  http.addHook('onClose', async () => {
    await closed;
  });
  const url = await http.listen(options);
  const take = (socket: Socket) => http.server.emit('connection', socket);
  try {
    const made = await copiesOf(http.server, LISTENING_HANDLES - 1, take);
    // Closed while the copies were being made: they must not go on accepting.
    if (!http.server.listening) for (const copy of made) copy.close();
    else copies = made;
  } catch (err) {
    log.warn({ err }, 'listening with one handle: more could not be made');
  }
  return url;
}
