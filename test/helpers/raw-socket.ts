import { connect, type Socket } from 'node:net';

/**
 * Plain TCP clients for attacks an HTTP client library would not make (a body one byte at a
 * time, headers that never end). Every socket a file opens is destroyed when the file ends,
 * also after a failed test.
 */
const sockets = new Set<Socket>();
/** Run when each file ends (`test/helpers/each-file.ts`). */
export const destroyRawSockets = () => {
  for (const s of sockets) s.destroy();
};

export interface RawSocket {
  socket: Socket;
  /** Everything the server sent so far. */
  received(): string;
  /** Resolves when the server closes the connection (or it breaks), with what it sent. */
  closed: Promise<string>;
  /** Writes `chunk` every `everyMs` until `count` writes or the socket closes. */
  trickle(chunk: string, everyMs: number, count: number): void;
  destroy(): void;
}

export async function openRawSocket(baseUrl: string): Promise<RawSocket> {
  const { hostname, port } = new URL(baseUrl);
  const socket = connect(Number(port), hostname);
  sockets.add(socket);
  let data = '';
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => (data += d));
  socket.on('error', () => {});
  let timer: NodeJS.Timeout | undefined;
  const closed = new Promise<string>((resolve) =>
    socket.once('close', () => {
      clearInterval(timer);
      sockets.delete(socket);
      resolve(data);
    }),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('close', () => reject(new Error('the connection closed before it opened')));
  });
  return {
    socket,
    received: () => data,
    closed,
    trickle(chunk, everyMs, count) {
      let left = count;
      timer = setInterval(() => {
        if (left-- <= 0 || socket.destroyed) return clearInterval(timer);
        socket.write(chunk);
      }, everyMs);
    },
    destroy: () => socket.destroy(),
  };
}

/** Whether `promise` settles within `ms`: for "still open" checks, never for durations. */
export const settlesWithin = (promise: Promise<unknown>, ms: number) =>
  Promise.race([promise.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
