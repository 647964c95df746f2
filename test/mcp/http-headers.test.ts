import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Browser } from 'puppeteer-core';
import { build } from 'vite';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { launchChromium, recordingPage } from '../helpers/browser.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * `/mcp` answers carry what every other answer of the API carries: helmet's security headers,
 * the request id and the CORS policy, on the transport's own answers too (JSON, event streams,
 * DELETE), and a browser on an allowed site can use it with the SDK's own client: the preflight
 * grants the MCP headers, and the session id is a header its scripts may read.
 */
let t: TestApp;
let alice: TestUser;
let browser: Browser;
let site: { origin: string; close(): Promise<void> };

/** A site on another loopback port (so another origin) serving a blank page and the SDK's client, bundled for the browser. */
async function startSite() {
  const bundled = await build({
    configFile: false,
    logLevel: 'silent',
    root: fileURLToPath(new URL('../..', import.meta.url)),
    build: { write: false, minify: false, lib: { entry: fileURLToPath(new URL('./browser-client.ts', import.meta.url)), formats: ['es'] } },
  });
  const output = (Array.isArray(bundled) ? bundled[0]! : bundled) as { output: { type: string; code?: string }[] };
  const code = output.output.find((o) => o.type === 'chunk')!.code!;
  const server: Server = createServer((req, res) => {
    if (req.url === '/mcp-client.js') res.writeHead(200, { 'content-type': 'text/javascript' }).end(code);
    else
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(
          '<!doctype html><title>An MCP client</title><script type="module">import * as mcp from "/mcp-client.js"; window.mcp = mcp;</script>',
        );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

setUp(async (start) => {
  site = await start.service(startSite());
  t = await start.app({ http: { corsOrigins: [site.origin] } });
  alice = await t.createUser('alice');
  await fixtures(t).agent(alice, { name: 'Lamplighter', key: 'lamplighter' });
  browser = (await start.service(launchChromium())).browser;
});

/** Helmet's set and the request id, as `test/rest/transport.test.ts` expects them on REST. */
function expectApiHeaders(headers: Headers) {
  expect(headers.get('x-content-type-options')).toBe('nosniff');
  expect(headers.get('x-frame-options')).toBe('SAMEORIGIN');
  expect(headers.get('referrer-policy')).toBe('no-referrer');
  expect(headers.get('content-security-policy')).toMatch(/default-src 'none'/);
  expect(headers.get('x-powered-by')).toBeNull();
  expect(headers.get('x-request-id')).toMatch(/./);
}

/** The SDK's client in Node, sending `origin` on every request and keeping every answer. */
async function recordedClient(origin: string) {
  const answers: { method: string; status: number; headers: Headers }[] = [];
  const transport = new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), {
    requestInit: { headers: { 'x-api-key': alice.apiKey, origin } },
    fetch: async (url, init) => {
      const response = await fetch(url, init);
      answers.push({ method: init?.method ?? 'GET', status: response.status, headers: response.headers });
      return response;
    },
  });
  const client = new Client({ name: 'headers-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport, answers };
}

describe('/mcp answers carry the API headers', () => {
  it("the SDK client's every answer (initialize, calls, the event stream, DELETE) carries the security headers and the allowed origin", async () => {
    const { client, transport, answers } = await recordedClient(site.origin);
    const listed = await client.callTool({ name: 'list_agents', arguments: {} });
    expect(JSON.stringify(listed.content)).toContain('Lamplighter');
    await transport.terminateSession();
    await client.close();

    // initialize, its notification, the call, the GET stream the client opens, and the DELETE.
    expect(new Set(answers.map((a) => a.method))).toEqual(new Set(['POST', 'GET', 'DELETE']));
    for (const { status, headers } of answers) {
      expect(status).toBeLessThan(300);
      expectApiHeaders(headers);
      expect(headers.get('access-control-allow-origin')).toBe(site.origin);
      expect(headers.get('vary')).toMatch(/Origin/);
      expect(headers.get('access-control-expose-headers')).toMatch(/Mcp-Session-Id/);
      expect(headers.get('access-control-allow-credentials')).toBeNull();
    }
    // The transport's own headers stay: the session id, and the answer's type.
    expect(answers[0]!.headers.get('mcp-session-id')).toMatch(/./);
    expect(answers.some((a) => a.headers.get('content-type')?.startsWith('text/event-stream'))).toBe(true);
  });

  it('an origin not listed gets no CORS headers from /mcp, the security headers all the same; refusals carry them too', async () => {
    const { client, transport, answers } = await recordedClient('https://evil.example');
    await client.listTools();
    await transport.terminateSession();
    await client.close();
    for (const { headers } of answers) {
      expectApiHeaders(headers);
      expect(headers.get('access-control-allow-origin')).toBeNull();
    }
    // An unknown session (the transport is not reached) and no key at all.
    const unknown = await fetch(`${t.url}/mcp`, {
      method: 'POST',
      headers: { origin: site.origin, 'x-api-key': alice.apiKey, 'mcp-session-id': 'no-such-session', 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    const keyless = await fetch(`${t.url}/mcp`, {
      method: 'POST',
      headers: { origin: site.origin, 'content-type': 'application/json' },
      body: '{}',
    });
    expect([unknown.status, keyless.status]).toEqual([404, 401]);
    for (const res of [unknown, keyless]) {
      expectApiHeaders(res.headers);
      expect(res.headers.get('access-control-allow-origin')).toBe(site.origin);
    }
  });

  it('a preflight to /mcp grants its methods and the MCP headers to an allowed origin, never credentials', async () => {
    for (const method of ['POST', 'GET', 'DELETE']) {
      const res = await fetch(`${t.url}/mcp`, {
        method: 'OPTIONS',
        headers: {
          origin: site.origin,
          'access-control-request-method': method,
          'access-control-request-headers': 'content-type, x-api-key, authorization, mcp-session-id, mcp-protocol-version, last-event-id',
        },
      });
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe(site.origin);
      expect(res.headers.get('access-control-allow-methods')!.split(/,\s*/)).toContain(method);
      const allowed = res.headers.get('access-control-allow-headers')!.toLowerCase().split(/,\s*/);
      for (const header of ['mcp-session-id', 'mcp-protocol-version', 'x-api-key', 'authorization', 'last-event-id'])
        expect(allowed).toContain(header);
      expect(res.headers.get('access-control-allow-credentials')).toBeNull();
    }
  });

  it("a page on an allowed site talks to /mcp with the SDK's own client in Chromium: a session, a call, its end", async () => {
    const { page, problems } = await recordingPage(browser, { width: 800, height: 600 });
    await page.goto(`${site.origin}/`, { waitUntil: 'load' });
    await page.waitForFunction(() => 'mcp' in window, { polling: 50 });
    const outcome = await page.evaluate(
      async (url, key) => {
        const { Client, StreamableHTTPClientTransport } = (window as any).mcp;
        const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { 'x-api-key': key } } });
        const client = new Client({ name: 'browser', version: '1.0.0' });
        await client.connect(transport);
        const sessionId = transport.sessionId as string | undefined;
        const tools = (await client.listTools()).tools.map((tool: { name: string }) => tool.name);
        const listed = await client.callTool({ name: 'list_agents', arguments: {} });
        await transport.terminateSession();
        await client.close();
        return { sessionId, tools, listed: JSON.stringify(listed.content), ended: transport.sessionId === undefined };
      },
      `${t.url}/mcp`,
      alice.apiKey,
    );
    expect(outcome.sessionId).toMatch(/./);
    expect(outcome.tools).toContain('talk_to_agent');
    expect(outcome.listed).toContain('Lamplighter');
    expect(outcome.ended).toBe(true);
    expect(problems).toEqual([]);
    await page.close();
  });
});
