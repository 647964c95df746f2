// Pieces the streaming benchmarks share: a paced fake provider speaking the OpenAI streaming
// protocol, an SSE client that times each token, and child processes that die with the run.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const root = new URL('..', import.meta.url).pathname;

// ---- the paced provider: `tokens` content chunks at `rate` per second per stream ----------------
/**
 * Streams `tokens` chunks (`t<i> `) at `rate` per second for a prompt naming `stream <id>`, and
 * notes when it wrote each one (performance.now()) in `sentAt`, by stream id.
 */
export async function startPacedProvider(tokens: number, rate: number) {
  const sentAt = new Map<string, number[]>();
  async function handle(req: IncomingMessage, res: ServerResponse) {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw) as { stream?: boolean; messages: { role: string; content: string }[] };
    const chunk = (delta: object, extra: object = {}) =>
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`);
    const finish = () => {
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
      res.write(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 50, completion_tokens: tokens } })}\n\n`);
      res.end('data: [DONE]\n\n');
    };
    const id = /stream (\S+)/.exec(body.messages.at(-1)?.content ?? '')?.[1];
    if (body.stream === false) {
      // parley's own short calls (a title, memories) take the whole answer at once, after the time a model would take.
      await sleep(Math.min(tokens, 20) * (1000 / rate));
      // A title, or one fact to remember (so memories are written, as with a real exchange).
      const content = body.messages[0]?.content?.startsWith('Give this conversation a title')
        ? 'Benchmark stream'
        : `Is running benchmark ${id}`;
      return void res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content } }] }));
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (!id || body.messages[0]?.content?.startsWith('Give this conversation a title')) {
      chunk({ content: 'Benchmark stream' });
      return finish();
    }
    const times: number[] = [];
    sentAt.set(id, times);
    for (let i = 0; i < tokens; i++) {
      await sleep(1000 / rate);
      if (res.destroyed) return;
      chunk({ content: `t${i} ` });
      times[i] = performance.now();
    }
    finish();
  }
  const server = createServer((req, res) => void handle(req, res).catch(() => res.destroy()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, sentAt, close: () => server.close() };
}

// ---- clients -----------------------------------------------------------------------------------
export interface StreamResult {
  latencies: number[];
  received: number;
  reordered: number;
  /** Tokens that arrived a second time. */
  duplicated: number;
  firstAt: number;
  lastAt: number;
  /** When the client sent its request (performance.now()): time to first token is `firstAt - startedAt`. */
  startedAt: number;
  /** The stream's end frame (REST `done`, graphql-ws `complete`) arrived. */
  ended: boolean;
  /** Error frames (REST `error` event, `type: "error"` updates, GraphQL errors) the client received. */
  errors: number;
  /** The request was refused or the connection broke: the reply never streamed. */
  failed: boolean;
}

export const newResult = (): StreamResult => ({
  latencies: [],
  received: 0,
  reordered: 0,
  duplicated: 0,
  firstAt: Infinity,
  lastAt: 0,
  startedAt: performance.now(),
  ended: false,
  errors: 0,
  failed: false,
});

/** What makes a run fail whatever its speed: work that did not finish, or finished wrong. */
export function faults(results: StreamResult[]) {
  return {
    failed: results.filter((r) => r.failed).length,
    unended: results.filter((r) => !r.failed && !r.ended).length,
    errors: results.reduce((n, r) => n + r.errors, 0),
  };
}

/** Rejects after `ms`: a stream that has not ended by then counts as hung, not as slow. */
export function deadline(ms: number, signal: AbortController) {
  const timer = setTimeout(() => signal.abort(new Error(`no end frame within ${ms} ms`)), ms);
  return () => clearTimeout(timer);
}

/** Records one token frame's text (`t<i> `) of stream `id`. */
export function tally(sentAt: Map<string, number[]>, result: StreamResult, id: string, text: string, expect: { next: number }) {
  const now = performance.now();
  const i = Number(/^t(\d+) $/.exec(text)?.[1]);
  if (i < expect.next) result.duplicated++;
  else if (i !== expect.next) result.reordered++;
  expect.next = Math.max(expect.next, i + 1);
  result.received++;
  const sent = sentAt.get(id)?.[i];
  if (sent !== undefined) result.latencies.push(now - sent);
  result.firstAt = Math.min(result.firstAt, now);
  result.lastAt = Math.max(result.lastAt, now);
}

export async function sseStream(
  sentAt: Map<string, number[]>,
  url: string,
  headers: Record<string, string>,
  body: object,
  id: string,
  result: StreamResult,
  deadlineMs = 120_000,
) {
  const abort = new AbortController();
  const cancel = deadline(deadlineMs, abort);
  result.startedAt = performance.now();
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
      signal: abort.signal,
    });
    if (!response.ok) {
      result.failed = true;
      console.error(`${url}: HTTP ${response.status} ${await response.text()}`);
      return;
    }
    const decoder = new TextDecoder();
    const expect = { next: 0 };
    let buffer = '';
    for await (const chunk of response.body!) {
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const line = block.split('\n').find((l) => l.startsWith('data: '));
        if (!line) continue;
        const frame = JSON.parse(line.slice(6)) as { event: string; data: { type?: string; text?: string } };
        if (frame.event === 'done') result.ended = true;
        else if (frame.event === 'error' || frame.data?.type === 'error') result.errors++;
        else if (frame.data?.type === 'assistant_token') tally(sentAt, result, id, frame.data.text!, expect);
      }
    }
  } catch (e) {
    // A deadline that passed leaves `ended` false (hung); any other break is a failed stream.
    if (!abort.signal.aborted) {
      result.failed = true;
      console.error(`${url}: ${(e as Error).message}`);
    }
  } finally {
    cancel();
  }
}

// ---- processes ---------------------------------------------------------------------------------
const children: ChildProcess[] = [];
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));

/** Starts a node process in the repository and resolves when its output matches `ready`. */
export function start(
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
): Promise<{ child: ChildProcess; match: RegExpMatchArray }> {
  const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env } });
  children.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    const check = (d: Buffer) => {
      out += d;
      const match = ready.exec(out);
      if (match) resolve({ child, match });
    };
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}:\n${out}`)));
  });
}

/** Stops every process started here and waits for them to exit. */
export async function stopAll() {
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(
    children.map((c) => new Promise((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve(null) : c.once('exit', resolve)))),
  );
}

export async function rssKb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]);
}

export const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
};
export const median = (xs: number[]) => quantile(xs, 0.5);
