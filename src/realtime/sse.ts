import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';

/** Headers that keep proxies and browsers from buffering or caching an event stream. */
export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
  connection: 'keep-alive',
} as const;

export interface SseFrame {
  id?: number;
  data: unknown;
}

/**
 * Server-Sent Events over a Fastify reply (hijacked: the stream is ours to write). Writes wait
 * while the socket is backed up, so an event stream never buffers more than one frame in the
 * process for a client that does not read; the event source decides when such a client is cut off.
 */
export class SseStream {
  private readonly res: ServerResponse;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly gone: Promise<void>;
  private open = true;

  constructor(reply: FastifyReply, heartbeatMs: number) {
    reply.hijack();
    this.res = reply.raw;
    this.res.writeHead(200, { ...(reply.getHeaders() as Record<string, string>), ...SSE_HEADERS });
    this.res.flushHeaders();
    this.gone = new Promise((resolve) => this.res.once('close', () => resolve()));
    void this.gone.then(() => this.stop());
    // A comment line now and then keeps idle proxies from closing the connection.
    this.heartbeat = setInterval(() => this.open && this.res.write(': keep-alive\n\n'), heartbeatMs);
  }

  get closed() {
    return !this.open;
  }

  /** Resolves when the client goes away (or the stream is ended). */
  whenGone() {
    return this.gone;
  }

  async send(frame: SseFrame): Promise<void> {
    if (!this.open) return;
    const text = `${frame.id !== undefined ? `id: ${frame.id}\n` : ''}data: ${JSON.stringify(frame.data)}\n\n`;
    if (!this.res.write(text)) await Promise.race([new Promise((resolve) => this.res.once('drain', resolve)), this.gone]);
  }

  end() {
    if (!this.open) return;
    this.stop();
    this.res.end();
  }

  private stop() {
    this.open = false;
    clearInterval(this.heartbeat);
  }
}
