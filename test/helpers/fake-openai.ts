import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** parley's own call naming a session after its first exchange, told apart by its instruction. */
export const isTitleRequest = (r: RecordedRequest) => Boolean(r.body.messages[0]?.content?.startsWith('Give this conversation a title'));
/** parley's own call extracting what an exchange taught the agent about the user. */
export const isMemoryRequest = (r: RecordedRequest) =>
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
  /** Send [DONE] but leave the response open (a provider that never ends its body). */
  holdAfterDone?: boolean;
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
  /** The client closed the connection before the answer was complete (it gave the call up). */
  cutOff?: boolean;
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
  let connections = 0;
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
   * Plays a script's content tokens at its pace, with its faults where they fall: `send` writes
   * each token, `broken` answers with a malformed or raw body (and ends the response). Resolves
   * false when a fault cut the answer short (a stall leaves the response open).
   */
  async function play(
    res: ServerResponse,
    script: Script,
    wait: () => Promise<unknown>,
    send: (text: string, i: number) => void,
    broken: { malformed(): void; raw(data: string): void },
  ): Promise<boolean> {
    for (const [i, text] of (script.tokens ?? []).entries()) {
      if (i === script.stallAfter) return false; // keep the socket open, send nothing more
      if (i === script.dropAfter) {
        // Ends the TCP connection after what was written reaches the client: a reply cut mid-stream.
        // What was written is flushed first: ended at once, the chunks still in the response's
        // buffer went with it on Node 24.22, and the client saw a call that failed before any text.
        await new Promise<void>((flushed) => res.write('', () => flushed()));
        res.socket?.end();
        return false;
      }
      if (i === script.malformedAfter) {
        broken.malformed();
        return false;
      }
      if (i === script.raw?.after) {
        broken.raw(script.raw.data);
        return false;
      }
      if (i === script.endAfter) {
        res.end();
        return false;
      }
      await script.gate?.(i);
      await wait();
      if (res.destroyed) return false;
      send(text, i);
    }
    return true;
  }

  /** The usage a script reports: its own, or counts of the request and the tokens. */
  const usageOf = (script: Script, requestLength: number) => {
    const usage =
      script.usage === undefined ? { prompt_tokens: requestLength >> 2, completion_tokens: script.tokens?.length ?? 0 } : script.usage;
    return usage && { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };
  };

  /**
   * A request with `stream: false` gets the whole answer in one JSON body, after the time its
   * chunks would have taken; the faults of a script happen where they would in a stream.
   */
  async function answerWhole(res: ServerResponse, script: Script, wait: () => Promise<unknown>, requestLength: number) {
    const json = (body: string) => res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    const played = await play(res, script, wait, () => {}, { malformed: () => json('{"choices": [ this is not'), raw: json });
    if (!played) return;
    const usage = usageOf(script, requestLength);
    json(
      JSON.stringify({
        id: 'chatcmpl-fake',
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: 'fake-model',
        choices: [{ index: 0, message: { role: 'assistant', content: (script.tokens ?? []).join('') }, finish_reason: 'stop' }],
        ...(usage ? { usage } : {}),
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
    res.once('close', () => {
      if (!res.writableFinished) recorded.cutOff = true;
    });
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
    const played = await play(res, script, wait, (text, i) => chunk(res, { ...(i === 0 ? { role: 'assistant' } : {}), content: text }), {
      malformed: () => res.end('data: {"choices": [ this is not json\n\n'),
      raw: (data) => res.end(`data: ${data}\n\n`),
    });
    if (!played) return;
    for (const [index, call] of (script.toolCalls ?? []).entries()) {
      chunk(res, { tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] });
      chunk(res, { tool_calls: [{ index, function: { arguments: call.arguments } }] });
    }
    res.write(
      `data: ${JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: script.toolCalls?.length ? 'tool_calls' : 'stop' }] })}\n\n`,
    );
    const usage = usageOf(script, raw.length);
    if (usage) res.write(`data: ${JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', choices: [], usage })}\n\n`);
    if (script.holdAfterDone) res.write('data: [DONE]\n\n');
    else res.end(script.omitDone ? undefined : 'data: [DONE]\n\n');
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  server.on('connection', (s) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    /** Connections made to it so far, and those open now. */
    connections: () => ({ made: connections, open: sockets.size }),
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
