import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, McpError, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { JsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type { OutboundConfig } from '../config.ts';
import { type McpCallResult, type McpClients, type McpEndpoint, McpServerFailed, type McpTool } from '../domain/mcp-servers/index.ts';
import { checkAddress } from './address-guard.ts';

/** How long a server may take and how much it may send (`mcp.*` settings). */
export interface McpClientLimits {
  /** Each request (connecting, listing tools, a call) ends with no answer after this long. */
  timeoutMs: number;
  /** How long a server's list of tools is kept without its saying it changed. */
  toolsTtlMs: number;
  /** The most bytes one answer (one POST's, or the event stream's over its life) may hold. */
  maxAnswerBytes: number;
  /** A connection unused this long is closed. */
  idleMs: number;
}

/** The most tools one server's list may give (a model takes a bounded number of functions). */
export const MOST_TOOLS = 128;
const MOST_PAGES = 10;

const noBody = new Set([101, 204, 205, 304]);

/** An answer's body as a web stream, failed once it passes `max` bytes. */
function cappedBody(response: IncomingMessage, max: number): ReadableStream<Uint8Array> {
  let seen = 0;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      response.on('data', (chunk: Buffer) => {
        seen += chunk.length;
        if (seen > max) {
          controller.error(new McpServerFailed(`the server sent more than ${max} bytes`));
          response.destroy();
          return;
        }
        controller.enqueue(new Uint8Array(chunk));
      });
      response.on('end', () => controller.close());
      response.on('error', (e) => controller.error(e));
    },
    cancel() {
      response.destroy();
    },
  });
}

/**
 * The fetch the SDK's transport is given: each request's URL is checked by the shared guard
 * (every address its host resolves to), the connection goes to an address that passed (a DNS
 * answer that changes meanwhile cannot point it inside), no redirect is followed here, and an
 * answer is cut past `maxBytes`.
 */
export function guardedFetch(config: OutboundConfig, maxBytes: number): FetchLike {
  return async (input, init = {}) => {
    const checked = await checkAddress(String(input), config);
    if ('refusal' in checked) throw new McpServerFailed(`the URL is refused: ${checked.refusal}`);
    const pinned = checked.addresses[0]!;
    const lookup: LookupFunction = (_host, options, callback) =>
      options.all ? callback(null, [pinned] as never) : callback(null, pinned.address, pinned.family);
    const request = checked.url.protocol === 'https:' ? httpsRequest : httpRequest;
    const headers = Object.fromEntries(new Headers(init.headers));
    return new Promise<Response>((resolve, reject) => {
      const req = request(checked.url, { method: init.method ?? 'GET', headers, lookup, agent: false, signal: init.signal ?? undefined });
      req.on('response', (response) => {
        const status = response.statusCode ?? 502;
        const answerHeaders = new Headers();
        for (const [name, value] of Object.entries(response.headers))
          for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value]) answerHeaders.append(name, one);
        if (noBody.has(status) || status < 200 || status > 599) response.resume();
        const body = noBody.has(status) || status < 200 || status > 599 ? null : cappedBody(response, maxBytes);
        resolve(new Response(body, { status: status < 200 || status > 599 ? 502 : status, headers: answerHeaders }));
      });
      req.on('error', reject);
      req.end(typeof init.body === 'string' ? init.body : undefined);
    });
  };
}

/** Why a request to a server failed, in a few words for its owner and the model (never a driver's text). */
export function reasonOf(err: unknown, timeoutMs: number): string {
  if (err instanceof McpServerFailed) return err.message;
  if (err instanceof McpError) {
    if (err.code === ErrorCode.RequestTimeout) return `no answer within ${timeoutMs} ms`;
    if (err.code === ErrorCode.ConnectionClosed) return 'the connection was closed before an answer';
    return `the server answered with an error (${err.code})`;
  }
  if (err instanceof StreamableHTTPError) return `the server answered HTTP ${err.code ?? 'with an error'}`;
  for (let e = err, depth = 0; e && typeof e === 'object' && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof McpServerFailed) return e.message;
    const code = (e as { code?: unknown }).code;
    if (code === 'ECONNREFUSED') return 'the connection was refused';
    if (code === 'ECONNRESET' || code === 'EPIPE') return 'the connection was closed before an answer';
    if (typeof code === 'string' && (code.startsWith('ERR_TLS') || code.includes('CERT'))) return `the TLS handshake failed (${code})`;
    if ((e as { name?: unknown }).name === 'SyntaxError' || (e as { name?: unknown }).name === 'ZodError')
      return 'the server answered with malformed JSON-RPC';
  }
  return 'the server could not be used';
}

/**
 * A validator of one tool's input schema: the SDK's own (Ajv, JSON Schema 2020-12 with formats),
 * each on an Ajv of its own, so an `$id` in one server's schema never stands for another's. A
 * schema Ajv cannot compile gives the reason instead, and the tool's calls are refused with it.
 */
function schemaValidator(schema: Record<string, unknown>): JsonSchemaValidator<unknown> | string {
  try {
    return new AjvJsonSchemaValidator().getValidator(schema);
  } catch {
    return "the tool's input schema cannot be used to check its arguments";
  }
}

const toolOf = (t: Tool): McpTool => ({
  name: t.name,
  title: t.title ?? t.annotations?.title ?? null,
  description: t.description ?? '',
  inputSchema: t.inputSchema as Record<string, unknown>,
});

/** A call's answer as the domain takes it: text parts joined, images kept, other parts named. */
function resultOf(answer: { isError?: unknown; content?: unknown }): McpCallResult {
  const parts = Array.isArray(answer.content)
    ? (answer.content as { type?: string; text?: string; data?: string; mimeType?: string; uri?: string }[])
    : [];
  const texts: string[] = [];
  const images: McpCallResult['images'] = [];
  for (const part of parts) {
    if (part.type === 'text' && typeof part.text === 'string') texts.push(part.text);
    else if (part.type === 'image' && typeof part.data === 'string' && typeof part.mimeType === 'string')
      images.push({ data: part.data, mimeType: part.mimeType });
    else if (part.type === 'resource_link' && typeof part.uri === 'string') texts.push(`[resource ${part.uri}]`);
    else texts.push(`[${part.type ?? 'unknown'} content]`);
  }
  return { isError: answer.isError === true, text: texts.join('\n'), images };
}

interface Connection {
  version: string;
  client: Client;
  ready: Promise<void>;
  tools?: { list: McpTool[]; at: number };
  idle?: NodeJS.Timeout;
}

/**
 * One connection (an MCP session) per server, through the SDK's client over Streamable HTTP:
 * opened when first needed, closed when unused for `idleMs`, when the server's settings change,
 * or after a failure (the next use opens another). Its list of tools is kept for `toolsTtlMs`
 * and replaced when the server sends `notifications/tools/list_changed`.
 */
export function mcpClients(config: OutboundConfig, limits: McpClientLimits): McpClients & { close(): Promise<void> } {
  const connections = new Map<string, Connection>();
  /** Each listed tool's schema compiled once, kept as long as its list is. */
  const validators = new WeakMap<McpTool, JsonSchemaValidator<unknown> | string>();

  function drop(id: string, which?: Connection) {
    const c = connections.get(id);
    if (!c || (which && c !== which)) return;
    connections.delete(id);
    clearTimeout(c.idle);
    void c.client.close().catch(() => {});
  }

  function used(id: string, c: Connection) {
    clearTimeout(c.idle);
    c.idle = setTimeout(() => drop(id, c), limits.idleMs).unref();
  }

  async function open(endpoint: McpEndpoint): Promise<Connection> {
    const kept = connections.get(endpoint.id);
    if (kept?.version === endpoint.version) {
      await kept.ready.catch((err: unknown) => {
        throw new McpServerFailed(reasonOf(err, limits.timeoutMs));
      });
      return kept;
    }
    if (kept) drop(endpoint.id);
    const client: Client = new Client(
      { name: 'parley', version: '1.0.0' },
      {
        listChanged: {
          tools: {
            onChanged: (error, tools) => {
              c.tools = !error && tools ? { list: tools.slice(0, MOST_TOOLS).map(toolOf), at: Date.now() } : undefined;
            },
          },
        },
      },
    );
    const transport = new StreamableHTTPClientTransport(new URL(endpoint.url), {
      fetch: guardedFetch(config, limits.maxAnswerBytes),
      requestInit: { headers: endpoint.headers },
      reconnectionOptions: { maxRetries: 2, initialReconnectionDelay: 1000, maxReconnectionDelay: 10_000, reconnectionDelayGrowFactor: 2 },
    });
    const c: Connection = { version: endpoint.version, client, ready: client.connect(transport, { timeout: limits.timeoutMs }) };
    connections.set(endpoint.id, c);
    client.onclose = () => drop(endpoint.id, c);
    try {
      await c.ready;
    } catch (err) {
      drop(endpoint.id, c);
      throw new McpServerFailed(reasonOf(err, limits.timeoutMs));
    }
    return c;
  }

  async function listTools(c: Connection): Promise<McpTool[]> {
    const list: McpTool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MOST_PAGES && list.length < MOST_TOOLS; page++) {
      const answer = await c.client.listTools(cursor ? { cursor } : undefined, { timeout: limits.timeoutMs });
      list.push(...answer.tools.map(toolOf));
      cursor = answer.nextCursor;
      if (!cursor) break;
    }
    return list.slice(0, MOST_TOOLS);
  }

  return {
    async tools(endpoint) {
      const c = await open(endpoint);
      used(endpoint.id, c);
      if (c.tools && Date.now() - c.tools.at < limits.toolsTtlMs) return c.tools.list;
      try {
        c.tools = { list: await listTools(c), at: Date.now() };
        return c.tools.list;
      } catch (err) {
        drop(endpoint.id, c);
        throw new McpServerFailed(reasonOf(err, limits.timeoutMs));
      }
    },
    async call(endpoint, tool, args, options) {
      const c = await open(endpoint);
      used(endpoint.id, c);
      try {
        const answer = await c.client.callTool({ name: tool, arguments: args }, undefined, {
          timeout: limits.timeoutMs,
          signal: options.signal,
          onprogress: options.onProgress
            ? (p) => options.onProgress!({ progress: p.progress, total: p.total ?? null, message: p.message ?? null })
            : undefined,
        });
        return resultOf(answer as { isError?: unknown; content?: unknown });
      } catch (err) {
        if (options.signal.aborted) throw options.signal.reason;
        // A call past its timeout was cancelled by the SDK (notifications/cancelled) on a session
        // that still works; any other failure leaves the session in doubt: the next use opens another.
        if (!(err instanceof McpError && err.code === ErrorCode.RequestTimeout)) drop(endpoint.id, c);
        throw new McpServerFailed(reasonOf(err, limits.timeoutMs));
      }
    },
    check(tool, args) {
      let validate = validators.get(tool);
      if (validate === undefined) {
        validate = schemaValidator(tool.inputSchema);
        validators.set(tool, validate);
      }
      if (typeof validate === 'string') return validate;
      const verdict = validate(args);
      return verdict.valid ? null : verdict.errorMessage.slice(0, 500);
    },
    forget: (id) => drop(id),
    async close() {
      for (const id of [...connections.keys()]) drop(id);
    },
  };
}
