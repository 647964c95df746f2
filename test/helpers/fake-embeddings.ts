import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export const DIMENSIONS = 768;

/** A unit vector along axis `i`, tilted towards axis `j` by `tilt` (cosine with axis i = 1/sqrt(1+tilt²)). */
export function axis(i: number, j?: number, tilt = 0): number[] {
  const v = new Array<number>(DIMENSIONS).fill(0);
  v[i] = 1;
  if (j !== undefined) v[j] = tilt;
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}

export interface EmbeddingsRequest {
  model: string;
  input: string[];
  authorization?: string;
}

/**
 * A real HTTP server on 127.0.0.1 speaking OpenAI's `POST /v1/embeddings`, answering from a
 * table of known vectors (texts it does not know get a fixed far-away axis). Tests can make it
 * fail the next requests, or hold every answer until released.
 */
export async function startFakeEmbeddings(known: Record<string, number[]> = {}) {
  const requests: EmbeddingsRequest[] = [];
  const failures: { status: number; body?: string; headers?: Record<string, string> }[] = [];
  let held: (() => void)[] | null = null;
  let answered = 0;
  let holdAfter: number | null = null;
  let dimensions = DIMENSIONS;
  let afterAnswer: (() => void) | null = null;
  const unknown = axis(DIMENSIONS - 1);

  const vectorFor = (text: string) =>
    (known[text] ?? unknown).slice(0, dimensions).concat(new Array(Math.max(0, dimensions - DIMENSIONS)).fill(0));

  async function handle(req: IncomingMessage, res: ServerResponse) {
    if (req.method !== 'POST' || req.url !== '/v1/embeddings') {
      res.writeHead(404).end();
      return;
    }
    // Counted as it arrives: a client that gives up before this process reads the body still sent it.
    const request: EmbeddingsRequest = { model: '', input: [], authorization: req.headers.authorization };
    requests.push(request);
    let body = '';
    try {
      for await (const chunk of req) body += chunk;
    } catch {
      return; // gone while sending
    }
    const parsed = JSON.parse(body) as { model: string; input: string | string[] };
    request.model = parsed.model;
    request.input = Array.isArray(parsed.input) ? parsed.input : [parsed.input];
    const failure = failures.shift();
    if (failure) {
      res
        .writeHead(failure.status, { 'content-type': 'application/json', ...failure.headers })
        .end(failure.body ?? JSON.stringify({ error: { message: 'injected failure' } }));
      return;
    }
    if (holdAfter !== null && answered >= holdAfter) await new Promise<void>((resolve) => (held ??= []).push(resolve));
    answered++;
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        object: 'list',
        model: parsed.model,
        data: request.input.map((text, index) => ({ object: 'embedding', index, embedding: vectorFor(text) })),
        usage: { prompt_tokens: 0, total_tokens: 0 },
      }),
    );
    const then = afterAnswer;
    afterAnswer = null;
    then?.();
  }

  const sockets = new Set<import('node:net').Socket>();
  const server = createServer((req, res) => void handle(req, res));
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    known,
    /** The next `count` requests fail with this status. */
    fail(count: number, status: number, options: { body?: string; headers?: Record<string, string> } = {}) {
      for (let i = 0; i < count; i++) failures.push({ status, ...options });
    },
    /** Answers `count` more requests, then holds the rest until `release`. */
    holdAfter(count: number) {
      holdAfter = answered + count;
    },
    release() {
      holdAfter = null;
      for (const resolve of held?.splice(0) ?? []) resolve();
    },
    /** Runs `then` once, right after the next answer is written. */
    afterNextAnswer(then: () => void) {
      afterAnswer = then;
    },
    /** Answers with vectors of another length, as a misconfigured model would. */
    setDimensions(n: number) {
      dimensions = n;
    },
    async close() {
      this.release();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type FakeEmbeddings = Awaited<ReturnType<typeof startFakeEmbeddings>>;
