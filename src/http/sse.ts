import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import { within } from '../domain/core/within.ts';

/**
 * Headers that keep proxies and browsers from buffering or caching an event stream. Its
 * connection is kept for the client's next request, as any other answer's is: under load a
 * Node server takes in one new connection per turn of its event loop (libuv accepts one at a
 * time), so a client that had to connect again for every stream would wait in the listen queue.
 * On shutdown a connection closes as soon as its stream has ended (`src/http/connections.ts`).
 */
export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
} as const;

export interface SseFrame {
  id?: number;
  /** The event's name (`event:` line): an EventSource hands a named event only to its listeners for that name. */
  event?: string;
  /** Written as JSON; a `JsonText` is written as it is. */
  data: unknown;
}

/** A frame's data already written as JSON (see `session-stream.ts`, a token's frame). */
export class JsonText {
  constructor(readonly json: string) {}
}

export interface SseOptions {
  heartbeatMs: number;
  /** Output allowed to wait for a client before writing pauses. */
  bufferBytes: number;
  /** How long writing may stay paused for a client that does not read before it is cut off. */
  slowClientMs: number;
}

/** How long a cut-off stream may take to hand its last bytes to a client that does not read. */
const LINGER_MS = 10_000;

/**
 * Server-Sent Events over a Fastify reply (hijacked: the stream is ours to write). Frames are
 * written as events come until `bufferBytes` of output wait for the client; then `roomToWrite`
 * waits for it to read. A client that leaves it waiting for `slowClientMs` (per `bufferBytes`
 * waiting) is too slow: the
 * caller writes a last frame saying so and ends the stream, and the socket is destroyed if even
 * that is not read. So a stream never holds much more than `bufferBytes` in this process.
 */
export class SseStream {
  private readonly res: ServerResponse;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly gone: Promise<void>;
  private open = true;

  constructor(
    reply: FastifyReply,
    private readonly options: SseOptions,
  ) {
    reply.hijack();
    this.res = reply.raw;
    this.res.writeHead(200, { ...(reply.getHeaders() as Record<string, string>), ...SSE_HEADERS });
    this.res.flushHeaders();
    this.gone = new Promise((resolve) => this.res.once('close', () => resolve()));
    void this.gone.then(() => this.stop());
    // A comment line now and then keeps idle proxies from closing the connection.
    this.heartbeat = setInterval(() => this.open && this.res.write(': keep-alive\n\n'), options.heartbeatMs);
  }

  get closed() {
    return !this.open;
  }

  /** Whether the client has read enough that more may be written now (true nearly always: no waiting then). */
  get hasRoom() {
    return this.open && this.res.writableLength <= this.options.bufferBytes;
  }

  /**
   * Resolves true when there is room to write again, false if the client is too slow (or gone).
   * A client gets `slowClientMs` for each `bufferBytes` waiting for it: one frame can be far
   * larger than the buffer (a long reply's final message repeats its whole text), and a reader
   * taking it steadily over a slow link has not stopped reading.
   */
  async roomToWrite(): Promise<boolean> {
    const waiting = this.res.writableLength;
    if (waiting <= this.options.bufferBytes) return this.open;
    const drained = await within(
      Promise.race([new Promise<boolean>((resolve) => this.res.once('drain', () => resolve(true))), this.gone.then(() => false)]),
      this.options.slowClientMs * (waiting / this.options.bufferBytes),
      false,
    );
    return drained && this.open;
  }

  /** Resolves when the client goes away (or the stream is ended). */
  whenGone() {
    return this.gone;
  }

  send(frame: SseFrame) {
    if (!this.open) return;
    const data = frame.data instanceof JsonText ? frame.data.json : JSON.stringify(frame.data);
    const name = frame.event === undefined ? '' : `event: ${frame.event}\n`;
    this.res.write(`${name}${frame.id !== undefined ? `id: ${frame.id}\n` : ''}data: ${data}\n\n`);
  }

  end() {
    if (!this.open) return;
    this.stop();
    this.res.end();
    if (this.res.writableLength === 0) return;
    setTimeout(() => {
      // A client that read it all meanwhile may already be sending its next request on this connection.
      if (!this.res.writableFinished) this.res.destroy();
    }, LINGER_MS).unref();
  }

  private stop() {
    this.open = false;
    clearInterval(this.heartbeat);
  }
}
