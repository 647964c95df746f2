import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { McpEndpoint, McpProgress } from '../../src/domain/mcp-servers/index.ts';
import { mcpClients } from '../../src/outbound/mcp-clients.ts';
import { type McpToolServer, PNG_1x1, startMcpToolServer } from '../helpers/mcp-tool-server.ts';
import { until } from '../helpers/until.ts';

// The MCP client adapter against the SDK's own server on loopback, and against servers that
// misbehave (one that never answers, one that answers malformed JSON, one that answers too much,
// one that redirects): every failure is a reason in words, and the guard of users' URLs is asked
// at each connection.

const strict = { allowHttp: false, allowPrivate: false };
const loose = { allowHttp: true, allowPrivate: true };
const limits = { timeoutMs: 1_500, toolsTtlMs: 3_600_000, maxAnswerBytes: 64 * 1024, idleMs: 60_000 };
const TOKEN = 'Bearer loopback-secret';

let tools: McpToolServer;
let bad: Server;
let badBase: string;
const badHits: string[] = [];

beforeAll(async () => {
  tools = await startMcpToolServer({ authorization: TOKEN });
  bad = createServer((req, res) => {
    badHits.push(req.url ?? '');
    req.resume();
    if (req.url === '/hang') return;
    if (req.url === '/malformed') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":0,"resu');
    if (req.url === '/huge') return res.writeHead(200, { 'content-type': 'application/json' }).end(`{"x":"${'x'.repeat(200_000)}"}`);
    if (req.url === '/redirect') return res.writeHead(307, { location: tools.url }).end();
    res.writeHead(500).end();
  });
  await new Promise<void>((resolve) => bad.listen(0, '127.0.0.1', resolve));
  badBase = `http://127.0.0.1:${(bad.address() as AddressInfo).port}`;
});
afterAll(async () => {
  bad.closeAllConnections();
  await new Promise<void>((resolve) => bad.close(() => resolve()));
  await tools.close();
});

let made = 0;
const endpoint = (url: string, headers: Record<string, string> = {}): McpEndpoint => ({
  id: `server-${++made}`,
  url,
  headers,
  version: 'v1',
});

describe("listing a server's tools", () => {
  it('gives each tool with its JSON Schema, sending the headers given', async () => {
    const clients = mcpClients(loose, limits);
    try {
      const list = await clients.tools(endpoint(tools.url, { authorization: TOKEN, 'x-team': 'blue' }));
      expect(list.map((t) => t.name).sort()).toEqual(['echo', 'fail', 'hang', 'paced', 'slow', 'snapshot']);
      const echo = list.find((t) => t.name === 'echo')!;
      expect(echo.description).toBe('Says the text back');
      expect(echo.inputSchema).toMatchObject({
        type: 'object',
        properties: { text: { type: 'string', maxLength: 200 } },
        required: ['text'],
      });
      expect(tools.requests.at(-1)).toMatchObject({ authorization: TOKEN, 'x-team': 'blue' });
    } finally {
      await clients.close();
    }
  });

  it('keeps the list, and replaces it when the server says its tools changed', async () => {
    const clients = mcpClients(loose, limits);
    try {
      const server = endpoint(tools.url, { authorization: TOKEN });
      expect((await clients.tools(server)).map((t) => t.name)).not.toContain('weather');
      const asked = tools.requests.length;
      await clients.tools(server);
      // Kept: the second listing asked the server nothing.
      expect(tools.requests.length).toBe(asked);
      tools.addTool('weather');
      await until('the new tool listed', async () => (await clients.tools(server)).some((t) => t.name === 'weather'));
    } finally {
      await clients.close();
    }
  });

  it('fails with the reason when the server refuses the headers', async () => {
    const clients = mcpClients(loose, limits);
    try {
      await expect(clients.tools(endpoint(tools.url, { authorization: 'Bearer wrong' }))).rejects.toThrow('the server answered HTTP 401');
    } finally {
      await clients.close();
    }
  });
});

describe('a server that misbehaves', () => {
  it('fails the listing with a reason: no answer, malformed JSON-RPC, too much, a redirect not followed', async () => {
    const clients = mcpClients(loose, limits);
    try {
      await expect(clients.tools(endpoint(`${badBase}/hang`))).rejects.toThrow(`no answer within ${limits.timeoutMs} ms`);
      await expect(clients.tools(endpoint(`${badBase}/malformed`))).rejects.toThrow('the server answered with malformed JSON-RPC');
      await expect(clients.tools(endpoint(`${badBase}/huge`))).rejects.toThrow(`the server sent more than ${limits.maxAnswerBytes} bytes`);
      await expect(clients.tools(endpoint(`${badBase}/redirect`))).rejects.toThrow(/^the server answered HTTP 307/);
    } finally {
      await clients.close();
    }
  });
});

describe('the guard of users’ URLs', () => {
  it('is asked at each connection: an address inside is never connected to', async () => {
    const clients = mcpClients(strict, limits);
    const before = tools.requests.length;
    try {
      await expect(clients.tools(endpoint(tools.url, { authorization: TOKEN }))).rejects.toThrow(
        /^the URL is refused: must be an https URL/,
      );
      await expect(clients.tools(endpoint(tools.url.replace('http:', 'https:')))).rejects.toThrow(
        /^the URL is refused: its host 127\.0\.0\.1 resolves to 127\.0\.0\.1, a loopback/,
      );
      expect(tools.requests.length).toBe(before);
    } finally {
      await clients.close();
    }
  });
});

describe('calling a tool', () => {
  const signal = () => new AbortController().signal;

  it('hears its progress notifications as they come, then gives its text', async () => {
    const clients = mcpClients(loose, limits);
    try {
      const heard: McpProgress[] = [];
      const server = endpoint(tools.url, { authorization: TOKEN });
      const result = await clients.call(server, 'slow', { steps: 3 }, { signal: signal(), onProgress: (p) => heard.push(p) });
      expect(result).toEqual({ isError: false, text: 'counted to 3', images: [] });
      expect(heard).toEqual([1, 2, 3].map((n) => ({ progress: n, total: 3, message: `step ${n} of 3` })));
    } finally {
      await clients.close();
    }
  });

  it("gives a tool's failure as its answer, and its images", async () => {
    const clients = mcpClients(loose, limits);
    try {
      const server = endpoint(tools.url, { authorization: TOKEN });
      await expect(clients.call(server, 'fail', {}, { signal: signal() })).resolves.toEqual({
        isError: true,
        text: 'the tool failed on purpose',
        images: [],
      });
      await expect(clients.call(server, 'snapshot', {}, { signal: signal() })).resolves.toEqual({
        isError: false,
        text: 'a picture',
        images: [{ data: PNG_1x1, mimeType: 'image/png' }],
      });
    } finally {
      await clients.close();
    }
  });

  it('fails a call with no answer within the timeout, and the server is told to stop it', async () => {
    const clients = mcpClients(loose, limits);
    try {
      const server = endpoint(tools.url, { authorization: TOKEN });
      await expect(clients.call(server, 'hang', {}, { signal: signal() })).rejects.toThrow(`no answer within ${limits.timeoutMs} ms`);
      await until('the hanging call given up on the server', () => tools.hanging() === 0);
      // The session goes on: the next call is answered.
      await expect(clients.call(server, 'echo', { text: 'again' }, { signal: signal() })).resolves.toMatchObject({ text: 'echo: again' });
    } finally {
      await clients.close();
    }
  });
});
