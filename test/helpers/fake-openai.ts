import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

const isTitleRequest = (r: RecordedRequest) => Boolean(r.body.messages[0]?.content?.startsWith('Give this conversation a title'));
const isMemoryRequest = (r: RecordedRequest) =>
  Boolean(r.body.messages[0]?.content?.startsWith('From this exchange, list what is worth remembering'));

/** What the fake model does for one request. */
export interface Script {
  /** Content pieces, streamed one chunk each. */
  tokens?: readonly string[];
  /** Reasoning pieces (`reasoning_content` deltas), streamed before the content. */
  reasoning?: readonly string[];
  /** Tool calls asked for after the content (streamed in two pieces each: name, then arguments). */
  toolCalls?: { id: string; name: string; arguments: string }[];
  /** Pause before each chunk, in ms. */
  delayMs?: number;
  /** Usage reported in the final chunk; default: counts of the request and the tokens. */
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  /** Answer this HTTP status with an error body instead of streaming. */
  status?: number;
  /** Stop sending (keep the connection open) after this many content chunks. */
  stallAfter?: number;
  /** Close the connection (without ending the HTTP response) after this many content chunks. */
  dropAfter?: number;
  /** Send a chunk that is not JSON after this many content chunks. */
  malformedAfter?: number;
  /**
   * After `after` content chunks, send `data` as one event's data, as is (not encoded: a chunk of
   * the wrong shape, an error reported mid-stream, a huge chunk), then end the response.
   */
  raw?: { after: number; data: string };
  /** End the response cleanly after this many content chunks, with no finish_reason and no [DONE]. */
  endAfter?: number;
  /** Send the finish_reason chunk (and usage) but end the response without [DONE]. */
  omitDone?: boolean;
  /** Wait for this promise before each content chunk (a test holds the reply mid-stream). */
  gate?: (index: number) => Promise<void> | void;
}

export interface RecordedRequest {
  body: {
    model: string;
    messages: { role: string; content: string | null; tool_calls?: unknown[]; tool_call_id?: string }[];
    stream: boolean;
    tools?: { function: { name: string } }[];
    reasoning_effort?: string;
    max_tokens?: number;
  };
  headers: IncomingMessage['headers'];
}

/**
 * A small server speaking the OpenAI chat-completions wire protocol (streaming chunks, usage,
 * tool calls, errors), so tests drive the real provider client over real HTTP. Each request
 * takes the next queued script, or the default one.
 */
export async function startFakeOpenAI(defaultScript: Script = { tokens: ['Hello', ' there', '!'] }) {
  const queue: Script[] = [];
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  let fallback = defaultScript;
  const titleScript: Script = { tokens: ['A', ' Test', ' Title'] };
  let memoryScript: Script = { tokens: ['NONE'] };
  const housekeepingScript = (r: RecordedRequest) => (isTitleRequest(r) ? titleScript : isMemoryRequest(r) ? memoryScript : undefined);
  let chooser: ((request: RecordedRequest) => Script | undefined) | null = null;

  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const chunk = (res: ServerResponse, delta: object, extra: object = {}) =>
    res.write(
      `data: ${JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: 'fake-model', choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`,
    );

  /**
   * A request with `stream: false` gets the whole answer in one JSON body, after the time its
   * chunks would have taken; the faults of a script happen where they would in a stream.
   */
  async function answerWhole(res: ServerResponse, script: Script, wait: () => Promise<unknown>, requestLength: number) {
    const tokens = script.tokens ?? [];
    for (const i of tokens.keys()) {
      if (i === script.stallAfter) return;
      if (i === script.dropAfter) return void res.socket?.end();
      if (i === script.malformedAfter)
        return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"choices": [ this is not');
      if (i === script.raw?.after) return void res.writeHead(200, { 'content-type': 'application/json' }).end(script.raw.data);
      await script.gate?.(i);
      await wait();
      if (res.destroyed) return;
    }
    const usage = script.usage === undefined ? { prompt_tokens: requestLength >> 2, completion_tokens: tokens.length } : script.usage;
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        id: 'chatcmpl-fake',
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: 'fake-model',
        choices: [{ index: 0, message: { role: 'assistant', content: tokens.join('') }, finish_reason: 'stop' }],
        ...(usage ? { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } } : {}),
      }),
    );
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    let raw = '';
    for await (const part of req) raw += part;
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404).end();
      return;
    }
    const recorded: RecordedRequest = { body: JSON.parse(raw), headers: req.headers };
    requests.push(recorded);
    // parley names a session after its first exchange and extracts memories after each one, in
    // separate calls; those get their own answers so that they never take a script queued for a
    // reply.
    const housekeeping = housekeepingScript(recorded);
    const script = chooser?.(recorded) ?? housekeeping ?? queue.shift() ?? fallback;
    if (script.status) {
      res
        .writeHead(script.status, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: `fake failure ${script.status}`, type: 'server_error' } }));
      return;
    }
    const wait = () => (script.delayMs ? sleep(script.delayMs) : Promise.resolve());
    if (recorded.body.stream === false) return answerWhole(res, script, wait, raw.length);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (const text of script.reasoning ?? []) {
      await wait();
      chunk(res, { reasoning_content: text });
    }
    const tokens = script.tokens ?? [];
    for (const [i, text] of tokens.entries()) {
      if (i === script.stallAfter) return; // keep the socket open, send nothing more
      // Ends the TCP connection after what was written reaches the client: a reply cut mid-stream.
      if (i === script.dropAfter) return void res.socket?.end();
      if (i === script.malformedAfter) {
        res.write('data: {"choices": [ this is not json\n\n');
        return void res.end();
      }
      if (i === script.raw?.after) return void res.end(`data: ${script.raw.data}\n\n`);
      if (i === script.endAfter) return void res.end();
      await script.gate?.(i);
      await wait();
      if (res.destroyed) return;
      chunk(res, { ...(i === 0 ? { role: 'assistant' } : {}), content: text });
    }
    for (const [index, call] of (script.toolCalls ?? []).entries()) {
      chunk(res, { tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] });
      chunk(res, { tool_calls: [{ index, function: { arguments: call.arguments } }] });
    }
    res.write(
      `data: ${JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: script.toolCalls?.length ? 'tool_calls' : 'stop' }] })}\n\n`,
    );
    const usage = script.usage === undefined ? { prompt_tokens: raw.length >> 2, completion_tokens: tokens.length } : script.usage;
    if (usage)
      res.write(
        `data: ${JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', choices: [], usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } })}\n\n`,
      );
    res.end(script.omitDone ? undefined : 'data: [DONE]\n\n');
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    /** Queues scripts for the next requests, in order. */
    enqueue(...scripts: Script[]) {
      queue.push(...scripts);
    },
    /** Picks a script per request (for parallel replies whose order is not fixed). */
    choose(f: ((request: RecordedRequest) => Script | undefined) | null) {
      chooser = f;
    },
    /** The requests for replies (not for session titles or memories). */
    replyRequests: () => requests.filter((r) => !isTitleRequest(r) && !isMemoryRequest(r)),
    /** What the fake answers when asked for facts to remember (default: nothing). */
    setMemories(facts: string[]) {
      memoryScript = { tokens: [facts.length ? facts.join('\n') : 'NONE'] };
    },
    setDefault(script: Script) {
      fallback = script;
    },
    reset() {
      queue.length = 0;
      requests.length = 0;
      chooser = null;
      fallback = defaultScript;
      memoryScript = { tokens: ['NONE'] };
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type FakeOpenAI = Awaited<ReturnType<typeof startFakeOpenAI>>;
