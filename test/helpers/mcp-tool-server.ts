import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer, type RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

/** A 1×1 PNG, the image the `snapshot` tool returns. */
export const PNG_1x1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

export interface McpToolServer {
  url: string;
  /** The headers of every request it was sent, in order. */
  requests: IncomingHttpHeaders[];
  /** The texts `echo` was called with, in order. */
  echoed: string[];
  /** Calls of `hang` under way (each ends when its caller gives it up or the server closes). */
  hanging(): number;
  /** Lets the calls of `paced` waiting after their first progress notification go on to finish. */
  release(): void;
  /** Adds a tool named `name` (it echoes); the SDK tells each connected client that the list changed. */
  addTool(name: string): RegisteredTool[];
  close(): Promise<void>;
}

/** The tools every session of the server offers; `extra` ones added later are registered on each. */
interface State {
  echoed: string[];
  hanging: number;
  /** Calls of `paced` waiting to be released. */
  paced: (() => void)[];
}

function register(server: McpServer, state: State, extra: string[]) {
  const tools: RegisteredTool[] = [];
  tools.push(
    server.registerTool('echo', { description: 'Says the text back', inputSchema: { text: z.string().max(200) } }, async ({ text }) => {
      state.echoed.push(text);
      return { content: [{ type: 'text', text: `echo: ${text}` }] };
    }),
    server.registerTool(
      'slow',
      { description: 'Counts to `steps`, a progress notification each', inputSchema: { steps: z.number().int().min(1).max(20) } },
      async ({ steps }, request) => {
        const token = request._meta?.progressToken;
        for (let step = 1; step <= steps; step++) {
          if (token !== undefined)
            await request.sendNotification({
              method: 'notifications/progress',
              params: { progressToken: token, progress: step, total: steps, message: `step ${step} of ${steps}` },
            });
          await new Promise((r) => setTimeout(r, 20));
        }
        return { content: [{ type: 'text', text: `counted to ${steps}` }] };
      },
    ),
    server.registerTool(
      'paced',
      { description: 'Reports it is half done, then waits for the test to release it', inputSchema: { label: z.string().optional() } },
      async (_args, request) => {
        const token = request._meta?.progressToken;
        const report = (progress: number, message: string) =>
          token === undefined
            ? Promise.resolve()
            : request.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress, total: 2, message } });
        await report(1, 'half way');
        await new Promise<void>((resolve) => state.paced.push(resolve));
        await report(2, 'done');
        return { content: [{ type: 'text', text: 'paced to the end' }] };
      },
    ),
    server.registerTool('fail', { description: 'Always fails', inputSchema: {} }, async () => ({
      isError: true,
      content: [{ type: 'text', text: 'the tool failed on purpose' }],
    })),
    server.registerTool('snapshot', { description: 'Returns a picture', inputSchema: {} }, async () => ({
      content: [
        { type: 'text', text: 'a picture' },
        { type: 'image', data: PNG_1x1, mimeType: 'image/png' },
      ],
    })),
    server.registerTool('hang', { description: 'Never answers', inputSchema: {} }, async (_args, request) => {
      state.hanging++;
      await new Promise<void>((resolve) => request.signal.addEventListener('abort', () => resolve(), { once: true }));
      state.hanging--;
      return { content: [{ type: 'text', text: 'given up' }] };
    }),
  );
  for (const name of extra)
    tools.push(
      server.registerTool(name, { description: `Added later: ${name}`, inputSchema: {} }, async () => ({
        content: [{ type: 'text', text: name }],
      })),
    );
  return tools;
}

async function body(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
}

/**
 * An MCP server made with the SDK's own `McpServer` over Streamable HTTP on 127.0.0.1, with
 * sessions: tools `echo`, `slow` (progress), `paced` (progress, then held until `release()`),
 * `fail`, `snapshot` (an image) and `hang`. It answers
 * only requests whose Authorization is `authorization`, when given.
 */
export async function startMcpToolServer(options: { authorization?: string } = {}): Promise<McpToolServer> {
  const sessions = new Map<string, { server: McpServer; transport: StreamableHTTPServerTransport }>();
  const requests: IncomingHttpHeaders[] = [];
  const state: State = { echoed: [], hanging: 0, paced: [] };
  const extra: string[] = [];

  async function handle(request: IncomingMessage, response: ServerResponse) {
    requests.push(request.headers);
    if (options.authorization && request.headers.authorization !== options.authorization) {
      response.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    const parsed = request.method === 'POST' ? await body(request) : undefined;
    const id = request.headers['mcp-session-id'];
    const session = typeof id === 'string' ? sessions.get(id) : undefined;
    if (session) return session.transport.handleRequest(request, response, parsed);
    if (request.method !== 'POST' || !isInitializeRequest(parsed)) {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"no such session"}');
      return;
    }
    const server = new McpServer({ name: 'loopback-tools', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
    register(server, state, extra);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => void sessions.set(sid, { server, transport }),
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await server.connect(transport);
    await transport.handleRequest(request, response, parsed);
  }

  const http = createServer((request, response) => {
    handle(request, response).catch(() => {
      if (!response.headersSent) response.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    requests,
    echoed: state.echoed,
    hanging: () => state.hanging,
    release: () => {
      for (const resolve of state.paced.splice(0)) resolve();
    },
    addTool(name) {
      extra.push(name);
      return [...sessions.values()].map(({ server }) =>
        server.registerTool(name, { description: `Added later: ${name}`, inputSchema: {} }, async () => ({
          content: [{ type: 'text', text: name }],
        })),
      );
    },
    async close() {
      for (const resolve of state.paced.splice(0)) resolve();
      await Promise.all([...sessions.values()].map(({ server }) => server.close().catch(() => {})));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** An HTTP server that takes every request and never answers it (until it closes): an MCP server that hangs. */
export async function startStuckServer() {
  const held: ServerResponse[] = [];
  const http = createServer((_request, response) => void held.push(response));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    /** How many requests it holds. */
    asked: () => held.length,
    async close() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
