import { chmod, rm } from 'node:fs/promises';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { FastifyBaseLogger } from 'fastify';
import { describeError } from '../domain/core/describe-error.ts';
import {
  isOperation,
  type OperationArgs,
  type OperationContext,
  type OperationName,
  type OperationResult,
  operations,
} from './operations.ts';

/**
 * The running service's command channel: the CLI's writing commands (`keys create`, `manna
 * grant`, …) reach an embedded database that the service holds by asking the service over a Unix
 * socket in the data directory. Only the machine user that runs the service may connect: the
 * socket is created mode 0600 (Linux checks write permission on connect) inside a data directory
 * that is the owner's alone. One request per connection, newline-delimited JSON both ways:
 *   → {"command": "keys.create", "args": {...}}
 *   ← {"progress": [done, total]}*  then  {"result": ...} or {"error": "message"}
 * Nothing that crosses it is logged but the command's name: results carry API keys.
 */
export const commandSocketPath = (dataDir: string) => join(dataDir, 'parley.sock');

/** A Unix socket path longer than this cannot be bound (sun_path is 108 bytes on Linux). */
const MAX_SOCKET_PATH = 107;

type Reply = { progress: [number, number] } | { result: unknown } | { error: string };

export async function listenForCommands(
  dataDir: string,
  context: Omit<OperationContext, 'progress'>,
  log: FastifyBaseLogger,
): Promise<{ close(): Promise<void> } | null> {
  const path = commandSocketPath(dataDir);
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
    log.warn({ path }, 'DATA_DIR is too long a path for a Unix socket: CLI commands cannot reach this service while it runs');
    return null;
  }
  const open = new Set<Socket>();
  const server = createServer((socket) => {
    open.add(socket);
    socket.on('close', () => open.delete(socket));
    socket.on('error', () => socket.destroy());
    // A client gone mid-request (its error reaches the line reader too) ends only its own answer.
    answer(socket, context, log).catch(() => socket.destroy());
  });
  // The data directory's lock is ours, so a socket file left there is from a process that died.
  await rm(path, { force: true });
  // The socket file takes its mode from the umask when it is bound (synchronously, in listen):
  // owner-only from the first instant, not only after the chmod below.
  const umask = process.umask(0o177);
  let listening: Promise<void>;
  try {
    listening = new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } finally {
    process.umask(umask);
  }
  try {
    await listening;
    await chmod(path, 0o600);
  } catch (e) {
    log.warn({ path, err: e }, 'cannot listen for CLI commands: they cannot reach this service while it runs');
    return null;
  }
  return {
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        (server as Server).close(() => resolve());
      }),
  };
}

async function answer(socket: Socket, context: Omit<OperationContext, 'progress'>, log: FastifyBaseLogger) {
  const send = (reply: Reply) => socket.writable && socket.write(`${JSON.stringify(reply)}\n`);
  const lines = createInterface({ input: socket, crlfDelay: Infinity });
  for await (const line of lines) {
    lines.close();
    let request: { command?: unknown; args?: unknown };
    try {
      request = JSON.parse(line);
    } catch {
      send({ error: 'The request is not JSON' });
      return socket.end();
    }
    const { command } = request;
    if (!isOperation(command)) {
      send({ error: `Unknown command ${JSON.stringify(command)}` });
      return socket.end();
    }
    const operation = operations[command];
    const args = operation.args.safeParse(request.args ?? {});
    if (!args.success) {
      send({ error: `Bad arguments for ${command}: ${args.error.message}` });
      return socket.end();
    }
    log.info({ command }, 'CLI command over the local socket');
    try {
      const result = await operation.run({ ...context, progress: (done, total) => send({ progress: [done, total] }) }, args.data as never);
      send({ result });
    } catch (e) {
      send({ error: describeError(e) });
    }
    return socket.end();
  }
}

/** Thrown when nothing listens on the socket (no service, or one that does not take commands). */
export class NoServiceError extends Error {}

/** The CLI's side: runs `command` in the service listening in `dataDir`. */
export function callService<N extends OperationName>(
  dataDir: string,
  command: N,
  args: OperationArgs<N>,
  onProgress?: (done: number, total: number) => void,
): Promise<OperationResult<N>> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(commandSocketPath(dataDir));
    let answered = false;
    const settle = (outcome: () => void) => {
      if (answered) return;
      answered = true;
      outcome();
      socket.destroy();
    };
    // A socket file with no listener (left by a service that was killed) refuses the connection:
    // that is "no service", for the caller to say so or to go on without one. readline re-emits
    // the socket's errors on itself, so it needs the handler too, or the error ends the process.
    const failed = (e: NodeJS.ErrnoException) =>
      settle(() => reject(['ENOENT', 'ECONNREFUSED'].includes(e.code ?? '') ? new NoServiceError(e.message) : e));
    socket.on('connect', () => socket.write(`${JSON.stringify({ command, args })}\n`));
    socket.on('error', failed);
    const lines = createInterface({ input: socket, crlfDelay: Infinity });
    lines.on('error', failed);
    lines.on('line', (line) => {
      let reply: Reply;
      try {
        reply = JSON.parse(line) as Reply;
      } catch {
        return settle(() => reject(new Error('The running service answered something that is not a parley reply')));
      }
      if ('progress' in reply) return onProgress?.(...reply.progress);
      if ('result' in reply) settle(() => resolve(reply.result as OperationResult<N>));
      else settle(() => reject(new Error(reply.error)));
    });
    socket.on('close', () =>
      settle(() => reject(new Error('The running service closed the command socket without an answer (did it stop?)'))),
    );
  });
}
